//! Files kbench is handed — properties, workload and scenario files, payloads, certificates, token
//! files, result documents — read with a size cap for each kind, so that a wrong path (`/dev/zero`,
//! a disk image, a log) is one error naming the file instead of memory filling until the OOM killer
//! ends the run. The caps are far above any real file of the kind.

use std::io::Read;
use std::path::Path;

/// A kind of input and the most bytes kbench reads of it.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    /// The kind, for the error: "a properties file".
    pub what: &'static str,
    pub bytes: u64,
}

/// Properties files (`--producer.config`, `--command-config`, …): 1 MiB.
pub const PROPERTIES: Limit = Limit {
    what: "a properties file",
    bytes: 1 << 20,
};
/// YAML configuration: OMB workload and driver files, `--scenario`: 1 MiB (real ones are a few KB).
pub const CONFIG: Limit = Limit {
    what: "a configuration file",
    bytes: 1 << 20,
};
/// `--payload-file` and OMB's `payloadFile`: 256 MiB (kafka-producer-perf-test holds the whole file too).
pub const PAYLOAD: Limit = Limit {
    what: "a payload file",
    bytes: 256 << 20,
};
/// Certificates, keys and token files: 1 MiB.
pub const SECRET_FILE: Limit = Limit {
    what: "a certificate, key or token file",
    bytes: 1 << 20,
};
/// Result documents read back (`compare`, `report`, the server's registry): 256 MiB.
pub const RESULT: Limit = Limit {
    what: "a result document",
    bytes: 256 << 20,
};
/// Markdown and other text a suite step includes: 16 MiB.
pub const TEXT: Limit = Limit {
    what: "a text file",
    bytes: 16 << 20,
};

/// Why an input could not be read. Its text names no path: the caller puts the flag or field and
/// the path in front.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    #[error("larger than {}, the most kbench reads of {}", human(.0.bytes), .0.what)]
    TooLarge(Limit),
    #[error("not UTF-8 text")]
    NotText,
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// The whole file, or [`InputError::TooLarge`] as soon as it passes the limit: a device that never
/// ends is read only to the limit.
pub fn read(path: &Path, limit: Limit) -> Result<Vec<u8>, InputError> {
    let file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    file.take(limit.bytes + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit.bytes {
        return Err(InputError::TooLarge(limit));
    }
    Ok(out)
}

/// [`read`], as UTF-8 text.
pub fn read_text(path: &Path, limit: Limit) -> Result<String, InputError> {
    String::from_utf8(read(path, limit)?).map_err(|_| InputError::NotText)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_device_is_read_only_to_the_limit() {
        let e = read(Path::new("/dev/zero"), PROPERTIES).unwrap_err();
        assert_eq!(
            e.to_string(),
            "larger than 1 MiB, the most kbench reads of a properties file"
        );
        let e = read(Path::new("/nonexistent/kbench"), CONFIG).unwrap_err();
        assert!(e.to_string().starts_with("cannot read it: "), "{e}");
    }

    #[test]
    fn a_file_at_the_limit_is_read_whole() {
        let dir = std::env::temp_dir().join(format!("kbench-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("exact");
        std::fs::write(&p, vec![b'a'; 1 << 20]).unwrap();
        assert_eq!(read(&p, PROPERTIES).unwrap().len(), 1 << 20);
        std::fs::write(&p, vec![b'a'; (1 << 20) + 1]).unwrap();
        assert!(matches!(read(&p, PROPERTIES), Err(InputError::TooLarge(_))));
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_text(&p, PROPERTIES),
            Err(InputError::NotText)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
