# Strata's container image (docs/install.md, "Container"). From the
# repository root:
#
#   docker build -t strata:$(git describe --tags --always --dirty) \
#     --build-arg STRATA_VERSION=$(git describe --tags --always --dirty) \
#     --build-arg STRATA_COMMIT=$(git rev-parse HEAD) .
#
# The builder runs the release build (scripts/release) for the target
# architecture; the runtime image holds the static binary, the sample
# server.properties and a non-root user.

# The builder runs on the build machine's platform and cross-compiles
# (CGO_ENABLED=0), so a multi-platform build (docker buildx build
# --platform linux/amd64,linux/arm64) emulates nothing.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETARCH=amd64
ARG STRATA_VERSION=dev
ARG STRATA_COMMIT=
ARG STRATA_DATE=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN scripts/release --out /dist --arch "$TARGETARCH" \
 && cp "/dist/strata-$STRATA_VERSION-linux-$TARGETARCH/strata" /strata

FROM alpine:3.22
RUN addgroup -S -g 10001 strata \
 && adduser -S -D -H -u 10001 -G strata -h /var/lib/strata -s /sbin/nologin strata \
 && mkdir -p /var/lib/strata /etc/strata \
 && chown strata:strata /var/lib/strata
COPY --from=build /strata /usr/local/bin/strata
COPY packaging/server.properties /etc/strata/server.properties
USER strata:strata
WORKDIR /var/lib/strata
VOLUME /var/lib/strata
# Kafka clients; Prometheus metrics, /healthz and /readyz.
EXPOSE 9092 9644
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD wget -q -O /dev/null http://127.0.0.1:9644/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/strata"]
CMD ["serve", "--config", "/etc/strata/server.properties"]
