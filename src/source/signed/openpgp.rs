//! OpenPGP commit signatures (`gpg.format=openpgp`, git's default), checked
//! with rPGP against the trusted public keys: the primary key or a subkey
//! must make the detached signature verify over the commit's signed data;
//! its binding signatures must verify, it must not be revoked, and neither
//! it nor the primary key may have expired at the commit's time.

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey, SignedPublicSubKey};
use pgp::packet::Signature;
use pgp::types::{KeyDetails, Timestamp};

/// Reads every armored public key in `text`.
pub fn keys(text: &str) -> Result<Vec<SignedPublicKey>, String> {
    let (keys, _) = SignedPublicKey::from_string_many(text).map_err(|e| format!("not an OpenPGP key block: {e}"))?;
    let keys: Vec<SignedPublicKey> =
        keys.collect::<Result<_, _>>().map_err(|e| format!("a key does not parse: {e}"))?;
    for key in &keys {
        key.verify_bindings().map_err(|e| format!("key {}: its self-signatures do not verify: {e}", name(key)))?;
    }
    Ok(keys)
}

/// The key's name for messages: its fingerprint.
pub fn name(key: &SignedPublicKey) -> String {
    format!("{:X}", key.fingerprint())
}

/// Who signed `data` (the trusted key's fingerprint), or why not trusted.
pub fn verify(keys: &[SignedPublicKey], armored: &str, data: &[u8], time: i64) -> Result<String, String> {
    let (signature, _) =
        DetachedSignature::from_string(armored).map_err(|e| format!("its OpenPGP signature does not parse: {e}"))?;
    let issuer = issuer(&signature.signature);
    for key in keys {
        if signature.verify(key, data).is_ok() {
            return usable(key, &key.details.revocation_signatures, &self_signatures(key), key.created_at(), time)
                .map(|()| name(key));
        }
        for sub in &key.public_subkeys {
            if signature.verify(sub, data).is_ok() {
                let revoked: Vec<Signature> = sub
                    .signatures
                    .iter()
                    .filter(|s| s.typ() == Some(pgp::packet::SignatureType::SubkeyRevocation))
                    .cloned()
                    .collect();
                usable(key, &key.details.revocation_signatures, &self_signatures(key), key.created_at(), time)?;
                return subkey_usable(sub, &revoked, time)
                    .map(|()| format!("{} (subkey {:X})", name(key), sub.fingerprint()));
            }
        }
    }
    let known = keys.iter().any(|k| {
        issuer.contains(&format!("{:X}", k.fingerprint()))
            || k.public_subkeys.iter().any(|s| issuer.contains(&format!("{:X}", s.fingerprint())))
    });
    if known {
        Err(format!("its OpenPGP signature by {issuer} does not verify: the commit was changed after it was signed"))
    } else {
        Err(format!("it is signed by OpenPGP key {issuer}, which is not trusted"))
    }
}

/// The issuer as the signature names it (fingerprint, else key id).
fn issuer(signature: &Signature) -> String {
    if let Some(fingerprint) = signature.issuer_fingerprint().first() {
        return format!("{fingerprint:X}");
    }
    match signature.issuer_key_id().first() {
        Some(id) => id.as_ref().iter().map(|b| format!("{b:02X}")).collect(),
        None => "an unnamed key".to_owned(),
    }
}

fn self_signatures(key: &SignedPublicKey) -> Vec<Signature> {
    let users = key.details.users.iter().flat_map(|u| u.signatures.iter());
    key.details.direct_signatures.iter().chain(users).cloned().collect()
}

/// Not revoked, and not expired at `time` by its newest self-signature.
fn usable(
    key: &SignedPublicKey,
    revocations: &[Signature],
    self_signatures: &[Signature],
    created: Timestamp,
    time: i64,
) -> Result<(), String> {
    if !revocations.is_empty() {
        return Err(format!("its OpenPGP key {} is revoked", name(key)));
    }
    let newest = self_signatures.iter().max_by_key(|s| s.created().map(Timestamp::as_secs));
    if let Some(expiry) = newest.and_then(Signature::key_expiration_time).filter(|d| d.as_secs() > 0) {
        let ends = i64::from(created.as_secs()) + i64::from(expiry.as_secs());
        if time > ends {
            return Err(format!("its OpenPGP key {} had expired when the commit was made", name(key)));
        }
    }
    Ok(())
}

fn subkey_usable(sub: &SignedPublicSubKey, revocations: &[Signature], time: i64) -> Result<(), String> {
    if !revocations.is_empty() {
        return Err(format!("its OpenPGP subkey {:X} is revoked", sub.fingerprint()));
    }
    let newest = sub.signatures.iter().max_by_key(|s| s.created().map(Timestamp::as_secs));
    if let Some(expiry) = newest.and_then(Signature::key_expiration_time).filter(|d| d.as_secs() > 0) {
        let created = i64::from(sub.created_at().as_secs());
        if time > created + i64::from(expiry.as_secs()) {
            return Err(format!("its OpenPGP subkey {:X} had expired when the commit was made", sub.fingerprint()));
        }
    }
    Ok(())
}
