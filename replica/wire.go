package replica

// maxFrameSlack is what a response frame may exceed
// replica.fetch.response.max.bytes by: framing, plus the one batch a
// leader returns whole even when it is larger than the budget (KIP-74).
// A frame length beyond the budget plus this is refused before anything is
// allocated for it.
const maxFrameSlack = 64 << 20
