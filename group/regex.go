package group

// Regex subscriptions (KIP-848 SubscribedTopicRegex), resolved the way
// Kafka's group coordinator resolves them (GroupMetadataManager
// refreshRegularExpressions and Utils.throwIfRegularExpressionIsInvalid,
// Kafka 4.x):
//
//   - the pattern is RE2 syntax (Kafka compiles it with RE2/J; Go's regexp
//     is RE2) and one that does not compile is INVALID_REGULAR_EXPRESSION
//     with Kafka's message;
//   - a topic matches when the pattern matches its whole name
//     (Matcher.matches(), not find()): "foo" matches "foo" only, "foo.*"
//     every name starting with "foo";
//   - the names matched are every topic of the metadata image, internal
//     topics included: Kafka applies no internal-topic filter there (the
//     consumer's exclude.internal.topics is a client-side setting of the
//     classic pattern subscription), so ".*" resolves to __consumer_offsets
//     and __transaction_state too, and a member may be assigned their
//     partitions.
//
// Kafka then drops the topics the member may not DESCRIBE (ACLs); Strata
// has no topic ACLs on this path.

import (
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// internalTopics are Kafka's internal topics (Topic.INTERNAL_TOPICS). A
// Catalog whose Names leaves them out (Names should list every topic) is
// probed for them by name, so a regex still resolves to them.
var internalTopics = []string{OffsetsTopic, "__transaction_state", "__share_group_state"}

// compileSubscriptionRegex compiles a SubscribedTopicRegex into a
// whole-name matcher, or returns INVALID_REGULAR_EXPRESSION.
func compileSubscriptionRegex(pattern string) (*regexp.Regexp, int16, string) {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, kerr.InvalidRegularExpression.Code,
			fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %v.", pattern, err)
	}
	// The pattern compiled alone, so wrapping it cannot change its
	// meaning; \A and \z anchor at the ends of the name whatever flags
	// the pattern sets inside.
	re, err := regexp.Compile(`\A(?:` + pattern + `)\z`)
	if err != nil {
		return nil, kerr.InvalidRegularExpression.Code,
			fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %v.", pattern, err)
	}
	return re, 0, ""
}

// resolveRegex returns the sorted names of the topics re matches in full,
// internal topics included.
func resolveRegex(re *regexp.Regexp, cat Catalog) []string {
	var out []string
	for _, t := range cat.Names() {
		if re.MatchString(t) {
			out = append(out, t)
		}
	}
	for _, t := range internalTopics {
		if re.MatchString(t) && cat.Partitions(t) > 0 {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
