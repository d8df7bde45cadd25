//! `xray.app.proxyman.command.HandlerService`: the inbound and outbound handlers of the
//! running instance as panels see them. Users are added and removed at run time (AlterInbound
//! with AddUserOperation / RemoveUserOperation), listed and counted; inbounds and outbounds
//! are listed and removed. AddInbound/AddOutbound start a whole Xray handler config (decoded
//! by [`crate::handler_config`] into the config's JSON form, which the app builds as it builds
//! its config file). AlterOutbound is answered "unimplemented".
//!
//! The app does the work through [`Handlers`]; this module decodes Xray's messages (the
//! account inside a user is a `TypedMessage` naming one of Xray's account types) and answers
//! with Xray's messages and error texts, so that `xray api` prints the same.

use std::sync::Arc;

use prost::Message;
use tonic::{Request, Response, Status};

use crate::handler_config::{ConfigError, inbound_json, outbound_json};
use crate::proto::core::{InboundHandlerConfig, OutboundHandlerConfig};
use crate::proto::handler::handler_service_server::HandlerService;
use crate::proto::handler::{
    AddInboundRequest, AddInboundResponse, AddOutboundRequest, AddOutboundResponse,
    AddUserOperation, AlterInboundRequest, AlterInboundResponse, AlterOutboundRequest,
    AlterOutboundResponse, GetInboundUserRequest, GetInboundUserResponse,
    GetInboundUsersCountResponse, ListInboundsRequest, ListInboundsResponse, ListOutboundsRequest,
    ListOutboundsResponse, RemoveInboundRequest, RemoveInboundResponse, RemoveOutboundRequest,
    RemoveOutboundResponse, RemoveUserOperation,
};
use crate::proto::protocol::{SecurityConfig, SecurityType, User};
use crate::proto::proxy::{
    Shadowsocks2022Account, ShadowsocksAccount, TrojanAccount, VlessAccount, VmessAccount,
};
use crate::proto::serial::TypedMessage;

/// Xray's type names of the messages this service reads and writes inside `TypedMessage`s.
pub mod type_name {
    pub const ADD_USER: &str = "xray.app.proxyman.command.AddUserOperation";
    pub const REMOVE_USER: &str = "xray.app.proxyman.command.RemoveUserOperation";
    pub const VLESS: &str = "xray.proxy.vless.Account";
    pub const VMESS: &str = "xray.proxy.vmess.Account";
    pub const TROJAN: &str = "xray.proxy.trojan.Account";
    pub const SHADOWSOCKS_2022: &str = "xray.proxy.shadowsocks_2022.Account";
    pub const SHADOWSOCKS: &str = "xray.proxy.shadowsocks.Account";
}

/// A user's account, protocol by protocol, as Xray's account messages carry it.
#[derive(Clone, PartialEq, Eq)]
pub enum Account {
    /// The id as text (a UUID, or a string Xray maps to one); the flow ("" or
    /// "xtls-rprx-vision").
    Vless {
        id: String,
        flow: String,
    },
    /// The id as text; the user's security (Xray's enum: 0 unknown, 2 auto, 3 aes-128-gcm,
    /// 4 chacha20-poly1305).
    Vmess {
        id: String,
        security: i32,
    },
    Trojan {
        password: String,
    },
    /// The user's PSK as Xray's config writes it (base64).
    Shadowsocks2022 {
        key: String,
    },
    /// An AEAD-2017 user: its password and Xray's cipher enum (5 aes-128-gcm, 6 aes-256-gcm,
    /// 7 chacha20-poly1305, 8 xchacha20-poly1305).
    Shadowsocks {
        password: String,
        cipher_type: i32,
    },
}

/// Never prints secrets.
impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Account::Vless { .. } => "Account::Vless",
            Account::Vmess { .. } => "Account::Vmess",
            Account::Trojan { .. } => "Account::Trojan",
            Account::Shadowsocks2022 { .. } => "Account::Shadowsocks2022",
            Account::Shadowsocks { .. } => "Account::Shadowsocks",
        })
    }
}

/// One user of an inbound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiUser {
    pub email: String,
    pub level: u32,
    pub account: Account,
}

/// Why a handler operation failed; shown to the caller with Xray's wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandlerError {
    /// No inbound has this tag.
    NoInbound(String),
    /// The inbound's protocol has no users to manage (tunnel, SOCKS, …).
    NotUserManager,
    /// `protocol` is Xray's package path, e.g. "proxy/vless".
    UserExists {
        protocol: &'static str,
        email: String,
    },
    UserNotFound {
        protocol: &'static str,
        email: String,
    },
    /// Nothing has this tag (RemoveInbound).
    NoClue,
    /// A user that cannot be added as given (bad id, wrong account type, …).
    Invalid(String),
    /// AddInbound/AddOutbound: a handler config that cannot be decoded or is not supported.
    Config(ConfigError),
    /// AddInbound/AddOutbound: the handler's config does not build (the config's own check,
    /// with its path, e.g. `inbounds[0].settings.clients[0].id: …`).
    Build(String),
    /// An inbound with this tag is running already.
    InboundTagExists(String),
    /// An outbound with this tag is there already.
    OutboundTagExists(String),
    /// The inbound could not listen (a port in use…): nothing was started.
    Listen(String),
}

impl HandlerError {
    fn status(&self) -> Status {
        // grpc-go reports a plain Go error as code Unknown; Xray's errors carry their
        // package path.
        Status::unknown(match self {
            HandlerError::NoInbound(tag) => format!(
                "app/proxyman/command: failed to get handler: {tag} > app/proxyman/inbound: handler not found: {tag}"
            ),
            HandlerError::NotUserManager => {
                "app/proxyman/command: proxy is not a UserManager".into()
            }
            HandlerError::UserExists { protocol, email } => {
                format!("{protocol}: User {email} already exists.")
            }
            HandlerError::UserNotFound { protocol, email } => {
                format!("{protocol}: User {email} not found.")
            }
            HandlerError::NoClue => "common: not enough information for making a decision".into(),
            HandlerError::Invalid(why) => {
                format!("app/proxyman/command: failed to parse user > {why}")
            }
            HandlerError::Config(e @ ConfigError::Unsupported(_)) => {
                return Status::unimplemented(format!("skiff: {e}"));
            }
            HandlerError::Config(e @ ConfigError::Malformed(_)) => {
                return Status::invalid_argument(format!("skiff: malformed handler config: {e}"));
            }
            HandlerError::Build(why) => {
                return Status::invalid_argument(format!("skiff: {why}"));
            }
            HandlerError::InboundTagExists(tag) => {
                format!("app/proxyman/inbound: existing tag found: {tag}")
            }
            HandlerError::OutboundTagExists(tag) => {
                format!("app/proxyman/outbound: existing tag found: {tag}")
            }
            HandlerError::Listen(why) => why.clone(),
        })
    }
}

/// What the app gives the service: its inbounds' and outbounds' handlers.
pub trait Handlers: Send + Sync {
    /// Every inbound, in the order Xray lists them, with its config for the full listing.
    fn inbounds(&self) -> Vec<InboundHandlerConfig>;
    /// The inbound's users, all of them or the one with `email` (case-insensitive).
    fn users(&self, tag: &str, email: Option<&str>) -> Result<Vec<ApiUser>, HandlerError>;
    fn user_count(&self, tag: &str) -> Result<usize, HandlerError>;
    /// Adds a user: it can connect as soon as this returns.
    fn add_user(&self, tag: &str, user: ApiUser) -> Result<(), HandlerError>;
    /// Removes the user with `email`: it cannot connect once this returns, and its open
    /// connections are closed.
    fn remove_user(&self, tag: &str, email: &str) -> Result<(), HandlerError>;
    /// Stops the inbound's listeners; its live connections may finish.
    fn remove_inbound(&self, tag: &str) -> Result<(), HandlerError>;
    fn outbounds(&self) -> Vec<OutboundHandlerConfig>;
    /// Removes the outbound: connections routing sends to it are closed, as in Xray. An
    /// unknown tag is no error (Xray).
    fn remove_outbound(&self, tag: &str);
    /// Starts an inbound given as the JSON object of a config's `inbounds` array: it accepts
    /// connections once this returns. On any error nothing was started. `receiver`: the
    /// request's receiver settings, which ListInbounds reports as given (as Xray does).
    fn add_inbound(
        &self,
        inbound: serde_json::Value,
        receiver: Option<TypedMessage>,
    ) -> Result<(), HandlerError>;
    /// Adds an outbound given as the JSON object of a config's `outbounds` array.
    fn add_outbound(&self, outbound: serde_json::Value) -> Result<(), HandlerError>;
}

pub struct HandlerApi {
    handlers: Arc<dyn Handlers>,
}

impl HandlerApi {
    pub fn new(handlers: Arc<dyn Handlers>) -> HandlerApi {
        HandlerApi { handlers }
    }
}

/// `message` as a `TypedMessage` of Xray's type `name`.
pub fn typed_message<M: Message>(name: &str, message: &M) -> TypedMessage {
    TypedMessage {
        r#type: name.into(),
        value: message.encode_to_vec(),
    }
}

/// A user as Xray's `xray.common.protocol.User`.
pub fn user_to_proto(user: &ApiUser) -> User {
    let (kind, value) = match &user.account {
        Account::Vless { id, flow } => (
            type_name::VLESS,
            VlessAccount {
                id: id.clone(),
                flow: flow.clone(),
                encryption: String::new(),
            }
            .encode_to_vec(),
        ),
        Account::Vmess { id, security } => (
            type_name::VMESS,
            VmessAccount {
                id: id.clone(),
                security_settings: Some(SecurityConfig { r#type: *security }),
                tests_enabled: String::new(),
            }
            .encode_to_vec(),
        ),
        Account::Trojan { password } => (
            type_name::TROJAN,
            TrojanAccount {
                password: password.clone(),
            }
            .encode_to_vec(),
        ),
        Account::Shadowsocks2022 { key } => (
            type_name::SHADOWSOCKS_2022,
            Shadowsocks2022Account { key: key.clone() }.encode_to_vec(),
        ),
        Account::Shadowsocks {
            password,
            cipher_type,
        } => (
            type_name::SHADOWSOCKS,
            ShadowsocksAccount {
                password: password.clone(),
                cipher_type: *cipher_type,
                iv_check: false,
            }
            .encode_to_vec(),
        ),
    };
    User {
        level: user.level,
        email: user.email.clone(),
        account: Some(TypedMessage {
            r#type: kind.into(),
            value,
        }),
    }
}

/// Xray's `xray.common.protocol.User` as a user, its account decoded by type name.
pub fn user_from_proto(user: &User) -> Result<ApiUser, HandlerError> {
    let invalid = HandlerError::Invalid;
    let Some(account) = &user.account else {
        return Err(invalid("user has no account".into()));
    };
    let bytes = account.value.as_slice();
    let decode_error = |e: prost::DecodeError| invalid(format!("{}: {e}", account.r#type));
    let account = match account.r#type.as_str() {
        type_name::VLESS => {
            let a = VlessAccount::decode(bytes).map_err(decode_error)?;
            Account::Vless {
                id: a.id,
                flow: a.flow,
            }
        }
        type_name::VMESS => {
            let a = VmessAccount::decode(bytes).map_err(decode_error)?;
            Account::Vmess {
                id: a.id,
                security: a.security_settings.map_or(0, |s| s.r#type),
            }
        }
        type_name::TROJAN => {
            let a = TrojanAccount::decode(bytes).map_err(decode_error)?;
            Account::Trojan {
                password: a.password,
            }
        }
        type_name::SHADOWSOCKS_2022 => {
            let a = Shadowsocks2022Account::decode(bytes).map_err(decode_error)?;
            Account::Shadowsocks2022 { key: a.key }
        }
        type_name::SHADOWSOCKS => {
            let a = ShadowsocksAccount::decode(bytes).map_err(decode_error)?;
            Account::Shadowsocks {
                password: a.password,
                cipher_type: a.cipher_type,
            }
        }
        other => return Err(invalid(format!("unsupported account type {other}"))),
    };
    Ok(ApiUser {
        email: user.email.clone(),
        level: user.level,
        account,
    })
}

/// Xray's names of the VMess security values, for the security enum.
pub fn vmess_security(name: &str) -> i32 {
    match name {
        "aes-128-gcm" => SecurityType::Aes128Gcm as i32,
        "chacha20-poly1305" => SecurityType::Chacha20Poly1305 as i32,
        "auto" | "" => SecurityType::Auto as i32,
        _ => SecurityType::Unknown as i32,
    }
}

#[tonic::async_trait]
impl HandlerService for HandlerApi {
    async fn add_inbound(
        &self,
        request: Request<AddInboundRequest>,
    ) -> Result<Response<AddInboundResponse>, Status> {
        let inbound = request.into_inner().inbound.unwrap_or_default();
        let json = inbound_json(&inbound).map_err(|e| HandlerError::Config(e).status())?;
        self.handlers
            .add_inbound(json, inbound.receiver_settings)
            .map_err(|e| e.status())?;
        Ok(Response::new(AddInboundResponse {}))
    }

    async fn remove_inbound(
        &self,
        request: Request<RemoveInboundRequest>,
    ) -> Result<Response<RemoveInboundResponse>, Status> {
        self.handlers
            .remove_inbound(&request.into_inner().tag)
            .map_err(|e| e.status())?;
        Ok(Response::new(RemoveInboundResponse {}))
    }

    async fn alter_inbound(
        &self,
        request: Request<AlterInboundRequest>,
    ) -> Result<Response<AlterInboundResponse>, Status> {
        let r = request.into_inner();
        let Some(operation) = r.operation else {
            return Err(Status::unknown("app/proxyman/command: unknown operation"));
        };
        let bytes = operation.value.as_slice();
        let bad = |e: prost::DecodeError| Status::unknown(format!("unknown operation: {e}"));
        match operation.r#type.as_str() {
            type_name::ADD_USER => {
                let op = AddUserOperation::decode(bytes).map_err(bad)?;
                let user = op.user.unwrap_or_default();
                // Xray finds the handler before it parses the user.
                self.handlers.user_count(&r.tag).map_err(|e| e.status())?;
                let user = user_from_proto(&user).map_err(|e| e.status())?;
                self.handlers
                    .add_user(&r.tag, user)
                    .map_err(|e| e.status())?;
            }
            type_name::REMOVE_USER => {
                let op = RemoveUserOperation::decode(bytes).map_err(bad)?;
                self.handlers
                    .remove_user(&r.tag, &op.email)
                    .map_err(|e| e.status())?;
            }
            other => {
                return Err(Status::unknown(format!(
                    "app/proxyman/command: unknown operation > {other} is not an inbound operation"
                )));
            }
        }
        Ok(Response::new(AlterInboundResponse {}))
    }

    async fn list_inbounds(
        &self,
        request: Request<ListInboundsRequest>,
    ) -> Result<Response<ListInboundsResponse>, Status> {
        let mut inbounds = self.handlers.inbounds();
        if request.into_inner().is_only_tags {
            for inbound in &mut inbounds {
                inbound.receiver_settings = None;
                inbound.proxy_settings = None;
            }
        }
        Ok(Response::new(ListInboundsResponse { inbounds }))
    }

    async fn get_inbound_users(
        &self,
        request: Request<GetInboundUserRequest>,
    ) -> Result<Response<GetInboundUserResponse>, Status> {
        let r = request.into_inner();
        let email = Some(r.email.as_str()).filter(|e| !e.is_empty());
        let found = self.handlers.users(&r.tag, email).map_err(|e| e.status())?;
        let mut users: Vec<User> = found.iter().map(user_to_proto).collect();
        if email.is_some() && users.is_empty() {
            // Xray answers an unknown email with one empty user.
            users.push(User::default());
        }
        Ok(Response::new(GetInboundUserResponse { users }))
    }

    async fn get_inbound_users_count(
        &self,
        request: Request<GetInboundUserRequest>,
    ) -> Result<Response<GetInboundUsersCountResponse>, Status> {
        let count = self
            .handlers
            .user_count(&request.into_inner().tag)
            .map_err(|e| e.status())?;
        Ok(Response::new(GetInboundUsersCountResponse {
            count: i64::try_from(count).unwrap_or(i64::MAX),
        }))
    }

    async fn add_outbound(
        &self,
        request: Request<AddOutboundRequest>,
    ) -> Result<Response<AddOutboundResponse>, Status> {
        let outbound = request.into_inner().outbound.unwrap_or_default();
        let json = outbound_json(&outbound).map_err(|e| HandlerError::Config(e).status())?;
        self.handlers.add_outbound(json).map_err(|e| e.status())?;
        Ok(Response::new(AddOutboundResponse {}))
    }

    async fn remove_outbound(
        &self,
        request: Request<RemoveOutboundRequest>,
    ) -> Result<Response<RemoveOutboundResponse>, Status> {
        self.handlers.remove_outbound(&request.into_inner().tag);
        Ok(Response::new(RemoveOutboundResponse {}))
    }

    async fn alter_outbound(
        &self,
        _request: Request<AlterOutboundRequest>,
    ) -> Result<Response<AlterOutboundResponse>, Status> {
        Err(Status::unimplemented(
            "AlterOutbound is not supported by skiff yet",
        ))
    }

    async fn list_outbounds(
        &self,
        _request: Request<ListOutboundsRequest>,
    ) -> Result<Response<ListOutboundsResponse>, Status> {
        Ok(Response::new(ListOutboundsResponse {
            outbounds: self.handlers.outbounds(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_survive_the_trip_through_xray_messages() {
        for account in [
            Account::Vless {
                id: "b831381d-6324-4d53-ad4f-8cda48b30811".into(),
                flow: "xtls-rprx-vision".into(),
            },
            Account::Vmess {
                id: "b831381d-6324-4d53-ad4f-8cda48b30811".into(),
                security: vmess_security("chacha20-poly1305"),
            },
            Account::Trojan {
                password: "pw".into(),
            },
            Account::Shadowsocks2022 {
                key: "AQEBAQEBAQEBAQEBAQEBAQ==".into(),
            },
        ] {
            let user = ApiUser {
                email: "a@b".into(),
                level: 1,
                account,
            };
            let wire = user_to_proto(&user).encode_to_vec();
            let back = user_from_proto(&User::decode(wire.as_slice()).unwrap()).unwrap();
            assert_eq!(back, user);
        }
    }

    #[test]
    fn an_unknown_account_type_is_refused() {
        let user = User {
            account: Some(TypedMessage {
                r#type: "xray.proxy.socks.Account".into(),
                value: Vec::new(),
            }),
            ..User::default()
        };
        assert!(matches!(
            user_from_proto(&user),
            Err(HandlerError::Invalid(_))
        ));
    }
}
