//! The embedded database's own encryption key (ENC-4).
//!
//! Refusing `encryptionEnabled` without a key keeps payloads from being stored in clear,
//! but a broker that refuses it out of the box breaks the clients written for brokers that
//! accept it. The embedded cluster is this broker's alone, so it can keep a key of its
//! own: random, made once, in a file beside the data directory (never inside it, so a copy
//! of the cluster does not carry the key that opens it), readable by its owner only.

use aes_gcm::aead::{KeyInit, OsRng};
use aes_gcm::Aes256Gcm;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where the key of the cluster in `data_dir` lives: `<data_dir>.key`, beside it.
pub fn path_for(data_dir: &Path) -> PathBuf {
    let mut name = data_dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "postgres".into());
    name.push(".key");
    data_dir.with_file_name(name)
}

/// The key in `path` as 64 hex digits, made (32 random bytes, mode 0600) when the file
/// does not exist yet; `true` when this call made it.
pub fn load_or_create(path: &Path) -> Result<(String, bool), String> {
    let fail = |what: &str, e: std::io::Error| format!("{what} {}: {e}", path.display());
    match std::fs::read_to_string(path) {
        Ok(text) => return Ok((text.trim().to_string(), false)),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(fail("cannot read the encryption key file", e))
        }
        Err(_) => {}
    }
    let key = hex::encode(Aes256Gcm::generate_key(&mut OsRng));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| fail("cannot create the encryption key file", e))?;
    file.write_all(format!("{key}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| fail("cannot write the encryption key file", e))?;
    Ok((key, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_sits_beside_the_data_directory() {
        assert_eq!(
            path_for(Path::new("/var/lib/queen/postgres")),
            Path::new("/var/lib/queen/postgres.key")
        );
        assert_eq!(
            path_for(Path::new(".queen/postgres")),
            Path::new(".queen/postgres.key")
        );
    }

    #[test]
    fn a_key_is_made_once_private_and_read_back_after() {
        let dir = std::env::temp_dir().join(format!("queen-keyfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = path_for(&dir.join("postgres"));
        let _ = std::fs::remove_file(&path);
        let (key, made) = load_or_create(&path).unwrap();
        assert!(made);
        assert!(
            crate::seal::Sealer::from_hex(&key).is_ok(),
            "64 hex digits: {key}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load_or_create(&path).unwrap(), (key.clone(), false));
        let (other, _) = {
            std::fs::remove_file(&path).unwrap();
            load_or_create(&path).unwrap()
        };
        assert_ne!(other, key, "random each time one is made");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
