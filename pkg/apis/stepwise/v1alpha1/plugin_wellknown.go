package v1alpha1

// PluginRefusalReason is why the operator refused to start a plugin: the executor
// catalogue publishes it, a step waiting on one of the plugin's executors names it, and
// kubectl stepwise reads it, instead of a message.
type PluginRefusalReason string

const (
	// PluginUnsigned: the plugin's policy asks for a signature and none is next to it.
	PluginUnsigned PluginRefusalReason = "Unsigned"
	// PluginInvalidSignature: the signature file is not a Sigstore bundle over bytes.
	PluginInvalidSignature PluginRefusalReason = "InvalidSignature"
	// PluginSignedOtherContent: the signature is over other bytes than the plugin's (an
	// image re-pushed under the same tag with an earlier signature, say).
	PluginSignedOtherContent PluginRefusalReason = "SignedOtherContent"
	// PluginSignedByAnother: signed by another key or identity than the policy's.
	PluginSignedByAnother PluginRefusalReason = "SignedByAnother"
	// PluginNoTrustedRoot: a keyless policy, and the operator was given no trusted root.
	PluginNoTrustedRoot PluginRefusalReason = "NoTrustedRoot"
	// PluginChecksumMismatch: the plugin's SHA-256 is not the one its checksum file lists.
	PluginChecksumMismatch PluginRefusalReason = "ChecksumMismatch"
	// PluginNotVerifiable: neither a checksum nor a signature policy to verify it against.
	PluginNotVerifiable PluginRefusalReason = "NotVerifiable"
	// PluginDuplicate: a plugin of the same name was found first, elsewhere.
	PluginDuplicate PluginRefusalReason = "Duplicate"
	// PluginDidNotStart: verified, but it did not start or did not say what it serves.
	PluginDidNotStart PluginRefusalReason = "DidNotStart"
)

// Reasons of a step waiting on a plugin the operator refused.
const (
	// BlockerPlugin: a step's executor is served by a plugin the operator refused; the
	// blocker names the plugin's executable.
	BlockerPlugin = "Plugin"
	// ReasonPluginRefused: a step waits on a plugin the operator refused (its condition,
	// the pipeline's Ready condition, an Event on the pipeline and on the catalogue).
	ReasonPluginRefused = "PluginRefused"
)
