//! Where a backup is: a directory on the server's machine, or a prefix in
//! an S3-compatible bucket, and how the engine names each in `BACKUP … TO`.

use std::fmt;
use std::path::{Component, PathBuf};

use crate::error::{Error, Result};
use crate::layout::names::quote_literal;

/// An S3-compatible bucket's prefix and the credentials to reach it.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Location {
    /// The service's address, e.g. `https://s3.eu-west-1.amazonaws.com` or
    /// `http://127.0.0.1:9000`.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The key prefix the backup's objects are under (no leading or
    /// trailing `/`).
    pub prefix: String,
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key; never shown (see `Debug` and `Display`).
    pub secret_access_key: String,
}

impl fmt::Debug for S3Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Location")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Where a backup is written, or read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupLocation {
    /// A directory on the machine the engine runs on (absolute; made by
    /// the backup, so it must not exist yet).
    Directory(PathBuf),
    /// A prefix in an S3-compatible bucket (no objects under it yet).
    S3(S3Location),
}

impl BackupLocation {
    /// `dest` as given on a command line: `s3://bucket/prefix` (with the
    /// endpoint and credentials in `s3`), else an absolute directory.
    pub fn parse(dest: &str, s3: Option<S3Credentials>) -> Result<BackupLocation> {
        let invalid = |reason: String| Error::InvalidBackup(format!("location {dest:?}: {reason}"));
        if let Some(rest) = dest.strip_prefix("s3://") {
            let Some(s3) = s3 else {
                return Err(invalid(
                    "an s3:// location needs an endpoint and credentials".into(),
                ));
            };
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let prefix = prefix.trim_matches('/');
            if bucket.is_empty() || prefix.is_empty() {
                return Err(invalid("expected s3://bucket/prefix".into()));
            }
            if !(s3.endpoint.starts_with("http://") || s3.endpoint.starts_with("https://")) {
                return Err(invalid(format!(
                    "the endpoint {:?} is not an http:// or https:// address",
                    s3.endpoint
                )));
            }
            return Ok(BackupLocation::S3(S3Location {
                endpoint: s3.endpoint.trim_end_matches('/').to_owned(),
                bucket: bucket.to_owned(),
                prefix: prefix.to_owned(),
                access_key_id: s3.access_key_id,
                secret_access_key: s3.secret_access_key,
            }));
        }
        let path = PathBuf::from(dest);
        if !path.is_absolute() {
            return Err(invalid(
                "a directory must be given as an absolute path".into(),
            ));
        }
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(invalid("a directory may not contain .. components".into()));
        }
        if path.to_str().is_none() {
            return Err(invalid("not UTF-8".into()));
        }
        Ok(BackupLocation::Directory(path))
    }

    /// The engine's name for it: `File('…')` or `S3('…', key, secret)`.
    pub(crate) fn engine_expr(&self) -> String {
        match self {
            BackupLocation::Directory(dir) => {
                format!("File({})", quote_literal(&dir.to_string_lossy()))
            }
            BackupLocation::S3(s3) => format!(
                "S3({}, {}, {})",
                quote_literal(&s3.url("")),
                quote_literal(&s3.access_key_id),
                quote_literal(&s3.secret_access_key)
            ),
        }
    }
}

impl S3Location {
    /// The address of `key` under the prefix (the prefix itself for `""`),
    /// path-style.
    pub(crate) fn url(&self, key: &str) -> String {
        let base = format!("{}/{}/{}", self.endpoint, self.bucket, self.prefix);
        match key {
            "" => base,
            key => format!("{base}/{key}"),
        }
    }

    /// `s3_url_function(url, key, secret, 'RawBLOB')` reading or writing
    /// objects as whole strings.
    pub(crate) fn raw_function(&self, key: &str) -> String {
        format!(
            "s3({}, {}, {}, 'RawBLOB')",
            quote_literal(&self.url(key)),
            quote_literal(&self.access_key_id),
            quote_literal(&self.secret_access_key)
        )
    }
}

/// The endpoint and credentials of an `s3://` location.
#[derive(Clone)]
pub struct S3Credentials {
    /// The service's address (`http://host:port` or `https://…`).
    pub endpoint: String,
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Credentials")
            .field("endpoint", &self.endpoint)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Shown in reports, logs and manifests: no secret.
impl fmt::Display for BackupLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackupLocation::Directory(dir) => write!(f, "{}", dir.display()),
            BackupLocation::S3(s3) => write!(f, "s3://{}/{}", s3.bucket, s3.prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> S3Credentials {
        S3Credentials {
            endpoint: "http://127.0.0.1:9000/".into(),
            access_key_id: "key".into(),
            secret_access_key: "se'cret".into(),
        }
    }

    #[test]
    fn directories_must_be_absolute_and_plain() {
        assert_eq!(
            BackupLocation::parse("/backups/b1", None).unwrap(),
            BackupLocation::Directory("/backups/b1".into())
        );
        for bad in ["backups/b1", "/backups/../etc"] {
            let err = BackupLocation::parse(bad, None).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn s3_locations_need_a_bucket_a_prefix_and_credentials() {
        let BackupLocation::S3(s3) =
            BackupLocation::parse("s3://bk/daily/1/", Some(creds())).unwrap()
        else {
            panic!("not s3")
        };
        assert_eq!(s3.url(""), "http://127.0.0.1:9000/bk/daily/1");
        assert_eq!(
            s3.url(".backup"),
            "http://127.0.0.1:9000/bk/daily/1/.backup"
        );
        assert!(BackupLocation::parse("s3://bk/x", None).is_err());
        assert!(BackupLocation::parse("s3://bk", Some(creds())).is_err());
        let ftp = S3Credentials {
            endpoint: "ftp://x".into(),
            ..creds()
        };
        assert!(BackupLocation::parse("s3://bk/x", Some(ftp)).is_err());
    }

    #[test]
    fn secrets_are_quoted_for_the_engine_and_never_shown() {
        let location = BackupLocation::parse("s3://bk/x", Some(creds())).unwrap();
        assert!(location.engine_expr().contains(r"'se\'cret'"));
        assert!(!format!("{location} {location:?}").contains("se'cret"));
    }
}
