//! `config.openshift.io/v1` ImageDigestMirrorSet and ImageTagMirrorSet.

use serde::Deserialize;

use super::meta::ObjectMeta;

/// An ImageDigestMirrorSet.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageDigestMirrorSet {
    /// `config.openshift.io/v1`.
    pub api_version: String,
    /// `ImageDigestMirrorSet`.
    pub kind: String,
    /// Name.
    pub metadata: ObjectMeta,
    /// The mirrors.
    pub spec: ImageDigestMirrorSetSpec,
}

/// `spec` of an [`ImageDigestMirrorSet`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageDigestMirrorSetSpec {
    /// Source → mirrors entries, in priority order.
    #[serde(default)]
    pub image_digest_mirrors: Vec<MirrorEntry>,
}

/// An ImageTagMirrorSet.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageTagMirrorSet {
    /// `config.openshift.io/v1`.
    pub api_version: String,
    /// `ImageTagMirrorSet`.
    pub kind: String,
    /// Name.
    pub metadata: ObjectMeta,
    /// The mirrors.
    pub spec: ImageTagMirrorSetSpec,
}

/// `spec` of an [`ImageTagMirrorSet`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageTagMirrorSetSpec {
    /// Source → mirrors entries, in priority order.
    #[serde(default)]
    pub image_tag_mirrors: Vec<MirrorEntry>,
}

/// One source with its mirrors (the same shape in IDMS and ITMS).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MirrorEntry {
    /// The repository (or registry) being mirrored.
    pub source: String,
    /// Mirror locations, most preferred first.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// Whether the source may be contacted when every mirror fails.
    #[serde(default)]
    pub mirror_source_policy: Option<MirrorSourcePolicy>,
}

/// `mirrorSourcePolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum MirrorSourcePolicy {
    /// Fall back to the source (the default).
    AllowContactingSource,
    /// Never contact the source.
    NeverContactSource,
}
