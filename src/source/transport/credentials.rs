//! Which credential answers a libgit2 credentials request: decided from the
//! request and the configuration alone (pure, tested), then read from its
//! file at the moment of use, so a rotated Secret is picked up by the next
//! operation without a restart.

use std::path::{Path, PathBuf};

use git2::{Cred, CredentialType};

use super::location::{self, Location};
use super::{GitAuth, GitError};

/// GitHub's user name for installation and fine-grained tokens; GitLab and
/// Gitea accept any user name with a token as the password.
pub(crate) const TOKEN_USER: &str = "x-access-token";
/// The user of every hosted ssh Git service (GitHub, GitLab, Gitea, Azure).
pub(crate) const SSH_USER: &str = "git";

/// The answer to one credentials request; holds paths, never contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The ssh transport asks for the user name before anything else.
    Username(String),
    /// Public-key authentication with the deploy key in this file.
    SshKey {
        /// The ssh user.
        username: String,
        /// The private key file.
        key: PathBuf,
    },
    /// HTTP basic authentication with the token in this file as password.
    Token {
        /// The HTTP user.
        username: String,
        /// The token file.
        file: PathBuf,
    },
}

/// What the server asked for that is not configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Missing {
    /// The kind of credential, in words.
    pub asked: &'static str,
    /// The option that would provide it.
    pub option: &'static str,
}

/// Chooses the answer to a request for any of `allowed`.
pub(crate) fn choose(
    location: &Location,
    username_from_url: Option<&str>,
    allowed: CredentialType,
    auth: &GitAuth,
) -> Result<Answer, Missing> {
    let default_user = if matches!(location, Location::Ssh { .. }) { SSH_USER } else { TOKEN_USER };
    let username = username_from_url.filter(|u| !u.is_empty()).unwrap_or(default_user).to_owned();
    if allowed.contains(CredentialType::USERNAME) {
        return Ok(Answer::Username(username));
    }
    if allowed.intersects(CredentialType::SSH_MEMORY | CredentialType::SSH_KEY) {
        return match &auth.ssh_key {
            Some(key) => Ok(Answer::SshKey { username, key: key.clone() }),
            None => Err(Missing { asked: "an SSH key", option: "--git-ssh-key" }),
        };
    }
    if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
        return match &auth.token_file {
            Some(file) => Ok(Answer::Token { username, file: file.clone() }),
            None => Err(Missing { asked: "a user name and password", option: "--git-token-file" }),
        };
    }
    Err(Missing {
        asked: "a kind of credential winfleet does not support",
        option: "--git-token-file or --git-ssh-key",
    })
}

/// The credential that would cross plain `http://` to `url` without
/// `--allow-insecure-http` (the URL's own userinfo, else the token file), in
/// words that name no secret; None when nothing would, or it is allowed.
/// Checked before connecting: libgit2 sends a URL's userinfo unasked.
pub(crate) fn exposed_over_plain_http(url: &str, auth: &GitAuth) -> Option<String> {
    if auth.allow_insecure_http || !location::is_plain_http(url) {
        return None;
    }
    if location::userinfo(url).is_some() {
        return Some(URL_CREDENTIALS.to_owned());
    }
    auth.token_file.as_ref().map(|file| format!("token from {}", file.display()))
}

/// How the credentials a URL carries are named in messages.
pub(crate) const URL_CREDENTIALS: &str = "credentials in the URL";

/// What `answer` offers, in words that name files, never their contents.
pub(crate) fn describe(answer: &Answer) -> String {
    match answer {
        Answer::Username(user) => format!("user name {user}"),
        Answer::SshKey { username, key } => format!("SSH key {} for user {username}", key.display()),
        Answer::Token { username, file } => format!("token from {} for user {username}", file.display()),
    }
}

/// Reads the file `answer` names and builds the credential; the secret read
/// is added to `secrets`, so that no message can carry it afterwards.
pub(crate) fn materialize(answer: &Answer, secrets: &mut Vec<String>) -> Result<Cred, GitError> {
    let failed = |what: &'static str, path: &Path, reason: String| GitError::Credential {
        what,
        path: path.display().to_string(),
        reason,
    };
    match answer {
        Answer::Username(user) => {
            Cred::username(user).map_err(|e| failed("user name", Path::new(user), e.message().into()))
        }
        Answer::Token { username, file } => {
            let text = std::fs::read_to_string(file).map_err(|e| failed("token file", file, e.to_string()))?;
            // Secrets mounted from Kubernetes often end with a newline.
            let token = text.trim();
            if token.is_empty() {
                return Err(failed("token file", file, "it is empty".to_owned()));
            }
            secrets.push(token.to_owned());
            Cred::userpass_plaintext(username, token).map_err(|_| failed("token file", file, "unusable".to_owned()))
        }
        Answer::SshKey { username, key } => {
            let text = std::fs::read_to_string(key).map_err(|e| failed("SSH key", key, e.to_string()))?;
            Cred::ssh_key_from_memory(username, None, &text, None)
                .map_err(|e| failed("SSH key", key, format!("not a usable private key ({})", e.message())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(token: bool, key: bool) -> GitAuth {
        GitAuth {
            token_file: token.then(|| PathBuf::from("/run/secrets/token")),
            ssh_key: key.then(|| PathBuf::from("/run/secrets/id_ed25519")),
            known_hosts: None,
            allow_insecure_http: false,
        }
    }

    const SSH: Location = Location::Ssh { host: String::new(), port: 22 };

    #[test]
    fn https_uses_the_token_as_password_for_x_access_token_unless_the_url_names_a_user() {
        let asked = CredentialType::USER_PASS_PLAINTEXT;
        let file = PathBuf::from("/run/secrets/token");
        assert_eq!(
            choose(&Location::Http, None, asked, &auth(true, true)),
            Ok(Answer::Token { username: TOKEN_USER.into(), file: file.clone() })
        );
        assert_eq!(
            choose(&Location::Http, Some("oauth2"), asked, &auth(true, false)),
            Ok(Answer::Token { username: "oauth2".into(), file })
        );
        assert_eq!(
            choose(&Location::Http, None, asked, &auth(false, true)),
            Err(Missing { asked: "a user name and password", option: "--git-token-file" })
        );
    }

    #[test]
    fn ssh_gives_the_url_user_or_git_then_the_deploy_key() {
        let key = PathBuf::from("/run/secrets/id_ed25519");
        assert_eq!(
            choose(&SSH, None, CredentialType::USERNAME, &auth(false, true)),
            Ok(Answer::Username("git".into()))
        );
        assert_eq!(
            choose(&SSH, Some("deploy"), CredentialType::USERNAME, &auth(false, true)),
            Ok(Answer::Username("deploy".into()))
        );
        let keys = CredentialType::SSH_KEY | CredentialType::SSH_MEMORY | CredentialType::SSH_CUSTOM;
        assert_eq!(
            choose(&SSH, Some("deploy"), keys, &auth(true, true)),
            Ok(Answer::SshKey { username: "deploy".into(), key: key.clone() })
        );
        assert_eq!(choose(&SSH, None, keys, &auth(false, true)), Ok(Answer::SshKey { username: "git".into(), key }));
        assert_eq!(choose(&SSH, None, keys, &auth(true, false)).unwrap_err().option, "--git-ssh-key");
        assert!(choose(&SSH, None, CredentialType::SSH_INTERACTIVE, &auth(true, true)).is_err());
    }

    #[test]
    fn the_token_is_read_at_each_use_trimmed_and_recorded_as_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        let answer = Answer::Token { username: TOKEN_USER.into(), file: file.clone() };
        let mut secrets = Vec::new();
        let missing = materialize(&answer, &mut secrets).err().unwrap().to_string();
        assert!(missing.contains("token file") && missing.contains(&file.display().to_string()), "{missing}");
        std::fs::write(&file, "\n").unwrap();
        assert!(materialize(&answer, &mut secrets).err().unwrap().to_string().contains("empty"));
        std::fs::write(&file, "ghs_first\n").unwrap();
        assert!(materialize(&answer, &mut secrets).is_ok());
        std::fs::write(&file, "ghs_rotated").unwrap();
        assert!(materialize(&answer, &mut secrets).is_ok());
        assert_eq!(secrets, vec!["ghs_first".to_owned(), "ghs_rotated".to_owned()]);
        assert!(!describe(&answer).contains("ghs_"), "{}", describe(&answer));
    }

    #[test]
    fn a_token_or_userinfo_crosses_plain_http_only_when_allowed() {
        let token = auth(true, false);
        assert_eq!(
            exposed_over_plain_http("http://git.corp/x.git", &token).as_deref(),
            Some("token from /run/secrets/token")
        );
        let none = auth(false, false);
        assert_eq!(exposed_over_plain_http("http://u:pw@git.corp/x.git", &none).as_deref(), Some(URL_CREDENTIALS));
        assert_eq!(exposed_over_plain_http("http://u:pw@git.corp/x.git", &token).as_deref(), Some(URL_CREDENTIALS));
        assert_eq!(exposed_over_plain_http("http://git.corp/x.git", &none), None, "nothing to expose");
        assert_eq!(exposed_over_plain_http("https://u:pw@git.corp/x.git", &token), None, "TLS");
        assert_eq!(exposed_over_plain_http("/srv/x.git", &token), None);
        let allowed = GitAuth { allow_insecure_http: true, ..token };
        assert_eq!(exposed_over_plain_http("http://u:pw@git.corp/x.git", &allowed), None);
    }

    #[test]
    fn a_missing_key_file_is_named_by_path() {
        let answer = Answer::SshKey { username: "git".into(), key: PathBuf::from("/nonexistent/id_ed25519") };
        let text = materialize(&answer, &mut Vec::new()).err().unwrap().to_string();
        assert!(text.starts_with("cannot read the SSH key /nonexistent/id_ed25519"), "{text}");
    }
}
