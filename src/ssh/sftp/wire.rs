//! Compression on the wire (issue 30): a payload file is sent gzip-encoded
//! when that pays, and the node decodes it before checking its SHA-256.
//!
//! gzip because both dialects decode it with what the node already has:
//! `gzip -d` on posix, .NET's `System.IO.Compression.GZipStream` in Windows
//! PowerShell 5.1. A compressed upload lands beside the staged name with
//! [`SUFFIX`] added; the apply script decodes it into the staged name, then
//! checks the digest of the decoded bytes as it checks any upload.
//!
//! Compressed once per file content, not once per node: the encoded bytes
//! are kept in memory by SHA-256 for every later node and round.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use flate2::Compression;
use flate2::write::GzEncoder;
use tokio::sync::OnceCell;

/// What a compressed upload's remote name gains.
pub const SUFFIX: &str = ".winfleet-gz";

/// Compressing must save at least this share (in percent) of the file.
const MIN_SAVING_PERCENT: u64 = 10;

/// Files shorter than this are sent as they are (a gzip header and the
/// node's decoding cost more than they save).
const MIN_SIZE: usize = 512;

/// Kinds that are already compressed, by the name's extension.
const COMPRESSED: &[&str] = &[
    "gz", "tgz", "zip", "zst", "xz", "bz2", "7z", "lz4", "cab", "msi", "nupkg", "jar", "whl", "png", "jpg", "jpeg",
    "gif", "webp",
];

/// The cache holds at most this many encoded bytes; past it, it starts over.
const CACHE_LIMIT: usize = 512 << 20;

/// The gzip encoding of `data`, when worth sending instead of `data`:
/// not an already-compressed kind and at least 10% smaller.
pub fn encode(name: &str, data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < MIN_SIZE || already_compressed(name) {
        return None;
    }
    let mut encoder = GzEncoder::new(Vec::with_capacity(data.len() / 2), Compression::best());
    encoder.write_all(data).ok()?;
    let packed = encoder.finish().ok()?;
    let limit = data.len() as u64 * (100 - MIN_SAVING_PERCENT) / 100;
    (packed.len() as u64 <= limit).then_some(packed)
}

fn already_compressed(name: &str) -> bool {
    let Some((_, ext)) = name.rsplit_once('.') else { return false };
    COMPRESSED.iter().any(|c| ext.eq_ignore_ascii_case(c))
}

type Slot = Arc<OnceCell<Option<Arc<Vec<u8>>>>>;

struct Cache {
    slots: HashMap<String, Slot>,
    bytes: usize,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Cache { slots: HashMap::new(), bytes: 0 }))
}

/// The bytes to send for the local file `source` whose content has SHA-256
/// `sha256`: `Some` encoded bytes, or `None` to send the file as it is.
/// Computed once per content (concurrent callers wait for the first); a
/// file that cannot be read, or no longer has that digest, is sent as it is
/// (the node's digest check then judges what arrives).
pub async fn packed(source: &Path, sha256: &str) -> Option<Arc<Vec<u8>>> {
    let slot = {
        let mut cache = cache().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(cache.slots.entry(sha256.to_owned()).or_default())
    };
    let source = source.to_owned();
    let digest = sha256.to_owned();
    slot.get_or_init(|| async move {
        let work = move || {
            let data = std::fs::read(&source).ok()?;
            if crate::vocab::file::sha256_hex(&data) != digest {
                return None;
            }
            let name = source.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            encode(&name, &data).map(Arc::new)
        };
        let packed = tokio::task::spawn_blocking(work).await.ok().flatten();
        let mut cache = cache().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.bytes += packed.as_ref().map_or(0, |p| p.len());
        if cache.bytes > CACHE_LIMIT {
            cache.slots.clear();
            cache.bytes = 0;
        }
        packed
    })
    .await
    .clone()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn noise(len: usize) -> Vec<u8> {
        // xorshift: incompressible to gzip.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn a_compressible_file_is_sent_compressed_and_decodes_to_itself() {
        let text: Vec<u8> = (0..20_000).flat_map(|i| format!("line {i} of a config file\n").into_bytes()).collect();
        let packed = encode("kubelet.conf", &text).expect("text compresses");
        assert!(packed.len() * 4 < text.len(), "{} of {}", packed.len(), text.len());
        let mut back = Vec::new();
        GzDecoder::new(&packed[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back, text);
    }

    #[test]
    fn an_incompressible_file_or_a_compressed_kind_or_a_small_file_is_sent_as_it_is() {
        assert_eq!(encode("kubelet.exe", &noise(200_000)), None, "noise does not save 10%");
        assert_eq!(encode("images.tar.gz", &vec![0u8; 200_000]), None, "a .tar.gz is sent as it is");
        assert_eq!(encode("PAYLOAD.ZIP", &vec![0u8; 200_000]), None);
        assert_eq!(encode("small.txt", b"tiny"), None);
        // Half noise, half zeros: saves well over 10%.
        let mut half = noise(100_000);
        half.extend(vec![0u8; 100_000]);
        assert!(encode("mixed.bin", &half).is_some());
    }

    #[tokio::test]
    async fn a_content_is_compressed_once_and_a_stale_digest_is_sent_as_it_is() {
        let dir = std::env::temp_dir().join(format!("winfleet-wire-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.txt");
        let data = vec![b'a'; 100_000];
        std::fs::write(&path, &data).unwrap();
        let sha = crate::vocab::file::sha256_hex(&data);
        let first = packed(&path, &sha).await.unwrap();
        let second = packed(&path, &sha).await.unwrap();
        assert!(Arc::ptr_eq(&first, &second), "the same encoded bytes, not a second compression");
        assert_eq!(packed(&path, &"0".repeat(64)).await, None, "the file no longer has that digest");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
