//! The users of an inbound whose protocol takes users at run time (VLESS, VMess, Trojan,
//! Shadowsocks AEAD-2017 and 2022 multi-user), as Xray's API changes them: the list the API answers with,
//! the protocol server's table (changed in place, see each server's `add_user`), and per
//! user a signal that closes that user's open connections when it is removed.
//!
//! A connection's path pays for this once, after its handshake named a user with an email:
//! one lock and one map lookup ([`InboundUsers::watch`]), then a watch receiver its relay
//! runs beside. A user without an email cannot be removed (Xray's rule) and is never watched.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use skiff_api::handler_service::{Account, ApiUser, HandlerError, vmess_security};
use skiff_config::InboundProtocol;
use skiff_proto::trojan::codec::PasswordHash;
use skiff_proto::trojan::server::TrojanUser;
use skiff_proto::user_id::{UserChangeError, UserId, email_is};
use skiff_proto::vless::server::VlessUser;
use skiff_proto::vmess::VmessUser;
use tokio::sync::watch;

use crate::inbound::InboundKind;

/// The text Xray's UUIDs print as.
fn uuid_text(id: &[u8; 16]) -> String {
    let h: String = id.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Xray's cipher enum (xray.proxy.shadowsocks.CipherType) of an AEAD-2017 method.
pub fn cipher_type(method: skiff_proto::shadowsocks::Method) -> i32 {
    use skiff_proto::shadowsocks::Method;
    match method {
        Method::Aes128Gcm => 5,
        Method::Aes256Gcm => 6,
        Method::ChaCha20Poly1305 => 7,
        Method::XChaCha20Poly1305 => 8,
        _ => 0,
    }
}

/// The AEAD-2017 method of Xray's cipher enum.
fn method_of(cipher_type: i32) -> Option<skiff_proto::shadowsocks::Method> {
    use skiff_proto::shadowsocks::Method;
    Some(match cipher_type {
        5 => Method::Aes128Gcm,
        6 => Method::Aes256Gcm,
        7 => Method::ChaCha20Poly1305,
        8 => Method::XChaCha20Poly1305,
        _ => return None,
    })
}

/// The VMess security Xray reports for a user's configured one: "auto" (the default) is
/// aes-128-gcm on amd64 and arm64. The server follows the client anyway.
fn resolved(security: Option<&str>) -> &str {
    match security {
        None | Some("auto") => "aes-128-gcm",
        Some(other) => other,
    }
}

/// Emails name users case-insensitively: the key of the close signals.
fn email_key(email: &str) -> Cow<'_, str> {
    if email.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(email.to_ascii_lowercase())
    } else {
        Cow::Borrowed(email)
    }
}

struct State {
    /// In the order they were configured or added.
    list: Vec<ApiUser>,
    /// Per user with an email (lowercase): turns true when the user is removed.
    signals: HashMap<String, watch::Sender<bool>>,
}

pub struct InboundUsers {
    /// Xray's package path of the protocol, for its error texts ("proxy/vless").
    protocol: &'static str,
    state: Mutex<State>,
}

impl InboundUsers {
    /// The users of an inbound that manages users; None for other protocols.
    pub fn from_plan(plan: &InboundProtocol) -> Option<InboundUsers> {
        let (protocol, list): (&'static str, Vec<ApiUser>) = match plan {
            InboundProtocol::Vless(v) => (
                "proxy/vless",
                v.clients
                    .iter()
                    .map(|c| ApiUser {
                        email: c.email.clone().unwrap_or_default(),
                        level: c.level,
                        account: Account::Vless {
                            id: uuid_text(&c.id),
                            flow: if c.flow.is_vision() {
                                skiff_proto::vless::codec::FLOW_VISION.into()
                            } else {
                                String::new()
                            },
                        },
                    })
                    .collect(),
            ),
            InboundProtocol::Vmess(v) => (
                "proxy/vmess/inbound",
                v.clients
                    .iter()
                    .map(|c| ApiUser {
                        email: c.email.clone().unwrap_or_default(),
                        level: c.level,
                        account: Account::Vmess {
                            id: uuid_text(&c.id),
                            security: vmess_security(resolved(c.security.as_deref())),
                        },
                    })
                    .collect(),
            ),
            InboundProtocol::Trojan(t) => (
                "proxy/trojan",
                t.clients
                    .iter()
                    .map(|c| ApiUser {
                        email: c.email.clone().unwrap_or_default(),
                        level: c.level,
                        account: Account::Trojan {
                            password: c.password.clone(),
                        },
                    })
                    .collect(),
            ),
            InboundProtocol::Shadowsocks(ss) if ss.identity_key.is_some() => (
                "proxy/shadowsocks_2022",
                ss.users
                    .iter()
                    .map(|u| ApiUser {
                        email: u.email.clone().unwrap_or_default(),
                        level: u.level,
                        // As the config wrote it, as Xray reports it.
                        account: Account::Shadowsocks2022 {
                            key: u.password.0.clone(),
                        },
                    })
                    .collect(),
            ),
            // AEAD-2017 (one user or several): Xray's server manages its users too.
            InboundProtocol::Shadowsocks(ss) if !ss.users.iter().any(|u| u.method.is_2022()) => (
                "proxy/shadowsocks",
                ss.users
                    .iter()
                    .map(|u| ApiUser {
                        email: u.email.clone().unwrap_or_default(),
                        level: u.level,
                        account: Account::Shadowsocks {
                            password: u.password.0.clone(),
                            cipher_type: cipher_type(u.method),
                        },
                    })
                    .collect(),
            ),
            _ => return None,
        };
        let signals = list
            .iter()
            .filter(|u| !u.email.is_empty())
            .map(|u| (email_key(&u.email).into_owned(), watch::channel(false).0))
            .collect();
        Some(InboundUsers {
            protocol,
            state: Mutex::new(State { list, signals }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What closes the connections of the user with `email`; None when that user is gone
    /// (removed while its connection was in its handshake: close it too).
    pub fn watch(&self, email: &str) -> Option<watch::Receiver<bool>> {
        let state = self.state();
        state
            .signals
            .get(email_key(email).as_ref())
            .map(|s| s.subscribe())
    }

    /// The users, or the one with `email`.
    pub fn list(&self, email: Option<&str>) -> Vec<ApiUser> {
        let state = self.state();
        match email {
            None => state.list.clone(),
            Some(email) => state
                .list
                .iter()
                .find(|u| email_is(Some(&u.email), email))
                .cloned()
                .into_iter()
                .collect(),
        }
    }

    pub fn count(&self) -> usize {
        self.state().list.len()
    }

    /// Adds `user` to the list and to `kind`'s server; it can connect when this returns.
    pub fn add(&self, kind: &InboundKind, mut user: ApiUser) -> Result<(), HandlerError> {
        let mut state = self.state();
        let exists = || HandlerError::UserExists {
            protocol: self.protocol,
            email: user.email.clone(),
        };
        let key = email_key(&user.email).into_owned();
        if !user.email.is_empty() && state.signals.contains_key(&key) {
            return Err(exists());
        }
        let invalid = HandlerError::Invalid;
        let email = Some(user.email.clone()).filter(|e| !e.is_empty());
        // The server's table and the signal change under the lock a connection's `watch`
        // takes: a connection of the new user that gets past the handshake finds its signal.
        // Ids are listed as Xray lists them: a string mapped to a UUID shows the UUID.
        let mut id_text = None;
        let changed = match (kind, &user.account) {
            (InboundKind::Vless(server), Account::Vless { id, flow }) => {
                let id = UserId::parse(id).map_err(|e| invalid(format!("VLESS id: {e}")))?;
                id_text = Some(uuid_text(id.as_bytes()));
                let vision = match flow.as_str() {
                    "" => false,
                    skiff_proto::vless::codec::FLOW_VISION => true,
                    other => return Err(invalid(format!("VLESS flow {other} is not supported"))),
                };
                server.add_user(VlessUser { id, email, vision })
            }
            (InboundKind::Vmess(server), Account::Vmess { id, .. }) => {
                let id = UserId::parse(id).map_err(|e| invalid(format!("VMess id: {e}")))?;
                id_text = Some(uuid_text(id.as_bytes()));
                server.add_user(&VmessUser {
                    id,
                    email,
                    level: user.level,
                })
            }
            (InboundKind::Trojan(server), Account::Trojan { password }) => {
                server.add_user(PasswordHash::of(password), TrojanUser { email })
            }
            (InboundKind::Shadowsocks(server), Account::Shadowsocks2022 { key }) => {
                let bytes = skiff_proto::shadowsocks::method::base64_decode(key)
                    .ok_or_else(|| invalid("Shadowsocks 2022 key: not base64".into()))?;
                match server.add_user(bytes, email, user.level) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Err(UserChangeError::Exists)
                    }
                    // Any other refusal (a key of the wrong length) is the caller's mistake.
                    Err(e) => return Err(invalid(e.to_string())),
                }
            }
            (
                InboundKind::Shadowsocks(server),
                Account::Shadowsocks {
                    password,
                    cipher_type: kind,
                },
            ) => {
                let method = method_of(*kind)
                    .ok_or_else(|| invalid(format!("unsupported cipher type {kind}")))?;
                if password.is_empty() {
                    return Err(invalid("Shadowsocks password is not specified.".into()));
                }
                let added = server.add_user_2017(skiff_proto::shadowsocks::server::ServerUser {
                    method,
                    key: skiff_crypto::kdf::evp_bytes_to_key(password.as_bytes(), method.key_len()),
                    email,
                    level: user.level,
                });
                match added {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Err(UserChangeError::Exists)
                    }
                    Err(e) => return Err(invalid(e.to_string())),
                }
            }
            (_, account) => {
                return Err(invalid(format!(
                    "{account:?} does not fit a {} inbound",
                    self.protocol
                )));
            }
        };
        if let (Some(text), Account::Vless { id, .. } | Account::Vmess { id, .. }) =
            (id_text, &mut user.account)
        {
            *id = text;
        }
        match changed {
            Ok(()) => {
                if !user.email.is_empty() {
                    state.signals.insert(key, watch::channel(false).0);
                }
                state.list.push(user);
                Ok(())
            }
            Err(UserChangeError::Exists) => Err(exists()),
            Err(UserChangeError::NotFound) => Err(invalid("refused by the server".into())),
        }
    }

    /// Removes the user with `email` from the list and `kind`'s server, and closes its
    /// connections.
    pub fn remove(&self, kind: &InboundKind, email: &str) -> Result<(), HandlerError> {
        let mut state = self.state();
        let not_found = || HandlerError::UserNotFound {
            protocol: self.protocol,
            // Xray's AEAD-2017 validator names the email lower-cased.
            email: if self.protocol == "proxy/shadowsocks" {
                email.to_ascii_lowercase()
            } else {
                email.to_string()
            },
        };
        let Some(signal) = state.signals.remove(email_key(email).as_ref()) else {
            return Err(not_found());
        };
        let removed = match kind {
            InboundKind::Vless(server) => server.remove_user(email),
            InboundKind::Vmess(server) => server.remove_user(email),
            InboundKind::Trojan(server) => server.remove_user(email),
            InboundKind::Shadowsocks(server) => server
                .remove_user(email)
                .map_err(|_| UserChangeError::NotFound),
            _ => Err(UserChangeError::NotFound),
        };
        state.list.retain(|u| !email_is(Some(&u.email), email));
        // New connections are refused by now (the server's table is swapped); close the
        // open ones.
        signal.send_replace(true);
        removed.map_err(|_| not_found())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_print_as_xray_prints_them() {
        let id = [
            0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3,
            0x08, 0x11,
        ];
        assert_eq!(uuid_text(&id), "b831381d-6324-4d53-ad4f-8cda48b30811");
    }

    #[test]
    fn emails_are_keyed_case_insensitively() {
        assert_eq!(email_key("A@x"), "a@x");
        assert!(matches!(email_key("a@x"), Cow::Borrowed(_)));
    }
}
