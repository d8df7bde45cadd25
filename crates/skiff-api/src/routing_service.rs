//! `xray.app.router.command.RoutingService`: the router's rules changed at run time, as
//! `xray api adrules`, `lsrules`, `rmrules` and panels do. AddRule carries an
//! `xray.app.router.Config` inside a `TypedMessage`; this module checks and decodes it and
//! answers with Xray's messages and error texts, and the app does the work through
//! [`Routing`] (it turns the rules into its own, loading the geoip/geosite lists they name).
//!
//! TestRoute routes a described session without sending anything. SubscribeRoutingStats
//! answers as Xray does, whose API never enables routing statistics; the balancer calls
//! (GetBalancerInfo, OverrideBalancerTarget) answer "unimplemented".

use std::sync::Arc;

use prost::Message;
use skiff_core::BoxFuture;
use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status};

use crate::proto::router::Config;
use crate::proto::routing::routing_service_server::RoutingService;
use crate::proto::routing::{
    AddRuleRequest, AddRuleResponse, GetBalancerInfoRequest, GetBalancerInfoResponse, ListRuleItem,
    ListRuleRequest, ListRuleResponse, OverrideBalancerTargetRequest,
    OverrideBalancerTargetResponse, RemoveRuleRequest, RemoveRuleResponse, RoutingContext,
    SubscribeRoutingStatsRequest, TestRouteRequest,
};

/// The type name `xray api adrules` gives its config.
pub const CONFIG_TYPE: &str = "xray.app.router.Config";

/// Why the router refused a change or a question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoutingError {
    /// What Xray answers in the same case, its text as Xray words it (e.g.
    /// `app/router: duplicate ruleTag x`); sent with Xray's code, Unknown.
    Xray(String),
    /// A condition or setting Xray has and Skiff's router does not evaluate (a rule ignoring
    /// it would match more than it says): Unimplemented.
    Unsupported(String),
    /// The message cannot be a rule: a bad CIDR, regular expression, enum value…:
    /// InvalidArgument.
    Invalid(String),
}

impl From<RoutingError> for Status {
    fn from(e: RoutingError) -> Status {
        match e {
            RoutingError::Xray(text) => Status::unknown(text),
            RoutingError::Unsupported(text) => Status::unimplemented(text),
            RoutingError::Invalid(text) => Status::invalid_argument(text),
        }
    }
}

/// A rule as ListRule reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedRule {
    /// Its outbound's tag; "" for a rule that names a balancer.
    pub outbound_tag: String,
    /// Its `ruleTag`, "" for none.
    pub rule_tag: String,
}

/// What TestRoute found: the outbound picked, or no rule matched (Xray then answers an
/// error: the default outbound is the dispatcher's choice, not the router's).
pub type Picked = Option<String>;

/// The running router, as the service changes and asks it.
pub trait Routing: Send + Sync {
    /// Adds `config`'s rules and balancers after the current ones (`append`), or replaces the
    /// current rules and balancers with them. All or nothing.
    fn add_rules(&self, config: Config, append: bool) -> Result<(), RoutingError>;
    /// Removes every rule whose `ruleTag` is `rule_tag` (none is no error, as in Xray).
    fn remove_rule(&self, rule_tag: &str) -> Result<(), RoutingError>;
    /// The rules in order.
    fn list_rules(&self) -> Vec<ListedRule>;
    /// The outbound tag a session described by `context` would take.
    fn test_route(&self, context: RoutingContext) -> BoxFuture<'_, Result<Picked, RoutingError>>;
}

pub struct RoutingApi {
    routing: Arc<dyn Routing>,
}

impl RoutingApi {
    pub fn new(routing: Arc<dyn Routing>) -> RoutingApi {
        RoutingApi { routing }
    }
}

/// The `xray.app.router.Config` an AddRule carries.
pub fn decode_config(request: &AddRuleRequest) -> Result<Config, RoutingError> {
    let Some(message) = &request.config else {
        // Xray reads a missing message as an empty type name, which it cannot load.
        return Err(RoutingError::Invalid(
            "AddRule: no config (an xray.app.router.Config)".into(),
        ));
    };
    if message.r#type != CONFIG_TYPE {
        return Err(RoutingError::Xray(format!(
            "app/router: AddRule: config type error (`{}`, expected {CONFIG_TYPE})",
            message.r#type
        )));
    }
    Config::decode(message.value.as_slice())
        .map_err(|e| RoutingError::Invalid(format!("AddRule: {CONFIG_TYPE}: {e}")))
}

/// Xray's names of a RoutingContext's fields, for TestRoute's `FieldSelectors`: a selector
/// picks every field whose name starts with it; none picks all.
const FIELDS: &[&str] = &[
    "inbound",
    "network",
    "ip_source",
    "ip_target",
    "ip_local",
    "port_source",
    "port_target",
    "port_local",
    "domain",
    "protocol",
    "user",
    "attributes",
    "outbound_group",
    "outbound",
];

/// TestRoute's answer: the fields `selectors` pick of the session asked about, with the
/// outbound picked.
pub fn select_fields(
    asked: &RoutingContext,
    outbound: String,
    selectors: &[String],
) -> RoutingContext {
    let wanted = |field: &str| {
        selectors.is_empty() || selectors.iter().any(|s| field.starts_with(s.as_str()))
    };
    let mut out = RoutingContext::default();
    for field in FIELDS.iter().copied().filter(|f| wanted(f)) {
        match field {
            "inbound" => out.inbound_tag = asked.inbound_tag.clone(),
            "network" => out.network = asked.network,
            "ip_source" => out.source_i_ps = asked.source_i_ps.clone(),
            "ip_target" => out.target_i_ps = asked.target_i_ps.clone(),
            "ip_local" => out.local_i_ps = asked.local_i_ps.clone(),
            "port_source" => out.source_port = asked.source_port,
            "port_target" => out.target_port = asked.target_port,
            "port_local" => out.local_port = asked.local_port,
            "domain" => out.target_domain = asked.target_domain.clone(),
            "protocol" => out.protocol = asked.protocol.clone(),
            "user" => out.user = asked.user.clone(),
            "attributes" => out.attributes = asked.attributes.clone(),
            // Xray's router never fills the group tags of a route.
            "outbound_group" => {}
            "outbound" => out.outbound_tag = outbound.clone(),
            _ => {}
        }
    }
    out
}

#[tonic::async_trait]
impl RoutingService for RoutingApi {
    type SubscribeRoutingStatsStream = BoxStream<RoutingContext>;

    async fn subscribe_routing_stats(
        &self,
        _request: Request<SubscribeRoutingStatsRequest>,
    ) -> Result<Response<Self::SubscribeRoutingStatsStream>, Status> {
        // Xray's API service starts the routing server without a statistics channel.
        Err(Status::unknown(
            "app/router/command: Routing statistics not enabled.",
        ))
    }

    async fn test_route(
        &self,
        request: Request<TestRouteRequest>,
    ) -> Result<Response<RoutingContext>, Status> {
        let request = request.into_inner();
        let Some(asked) = request.routing_context else {
            return Err(Status::unknown(
                "app/router/command: Invalid routing request.",
            ));
        };
        match self.routing.test_route(asked.clone()).await? {
            Some(outbound) => Ok(Response::new(select_fields(
                &asked,
                outbound,
                &request.field_selectors,
            ))),
            None => Err(Status::unknown(
                "common: not enough information for making a decision",
            )),
        }
    }

    async fn get_balancer_info(
        &self,
        _request: Request<GetBalancerInfoRequest>,
    ) -> Result<Response<GetBalancerInfoResponse>, Status> {
        Err(Status::unimplemented(
            "GetBalancerInfo is not supported by Skiff yet",
        ))
    }

    async fn override_balancer_target(
        &self,
        _request: Request<OverrideBalancerTargetRequest>,
    ) -> Result<Response<OverrideBalancerTargetResponse>, Status> {
        Err(Status::unimplemented(
            "OverrideBalancerTarget is not supported by Skiff yet",
        ))
    }

    async fn add_rule(
        &self,
        request: Request<AddRuleRequest>,
    ) -> Result<Response<AddRuleResponse>, Status> {
        let request = request.into_inner();
        let config = decode_config(&request)?;
        self.routing.add_rules(config, request.should_append)?;
        Ok(Response::new(AddRuleResponse {}))
    }

    async fn remove_rule(
        &self,
        request: Request<RemoveRuleRequest>,
    ) -> Result<Response<RemoveRuleResponse>, Status> {
        let tag = request.into_inner().rule_tag;
        if tag.is_empty() {
            return Err(Status::unknown("app/router: empty tag name!"));
        }
        self.routing.remove_rule(&tag)?;
        Ok(Response::new(RemoveRuleResponse {}))
    }

    async fn list_rule(
        &self,
        _request: Request<ListRuleRequest>,
    ) -> Result<Response<ListRuleResponse>, Status> {
        let rules = self
            .routing
            .list_rules()
            .into_iter()
            .map(|r| ListRuleItem {
                tag: r.outbound_tag,
                rule_tag: r.rule_tag,
            })
            .collect();
        Ok(Response::new(ListRuleResponse { rules }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::router::RoutingRule;
    use crate::proto::serial::TypedMessage;

    fn request(r#type: &str, value: Vec<u8>) -> AddRuleRequest {
        AddRuleRequest {
            config: Some(TypedMessage {
                r#type: r#type.into(),
                value,
            }),
            should_append: true,
        }
    }

    #[test]
    fn the_config_is_decoded_only_under_its_type_name() {
        let config = Config {
            rule: vec![RoutingRule {
                rule_tag: "t".into(),
                inbound_tag: vec!["in".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let decoded = decode_config(&request(CONFIG_TYPE, config.encode_to_vec())).unwrap();
        assert_eq!(decoded, config);
        let wrong = decode_config(&request("xray.app.router.RoutingRule", vec![]));
        assert!(matches!(wrong, Err(RoutingError::Xray(t)) if t.contains("config type error")));
        let none = decode_config(&AddRuleRequest::default());
        assert!(matches!(none, Err(RoutingError::Invalid(_))));
    }

    #[test]
    fn malformed_bytes_are_an_invalid_argument_not_a_panic() {
        // A field 2 (rule) of wire type 2 whose length runs past the end, and garbage.
        for bytes in [vec![0x12, 0x40, 0x01], vec![0xff; 7], vec![0x0a]] {
            let e = decode_config(&request(CONFIG_TYPE, bytes)).unwrap_err();
            assert!(matches!(e, RoutingError::Invalid(_)), "{e:?}");
            assert_eq!(Status::from(e).code(), tonic::Code::InvalidArgument);
        }
    }

    #[test]
    fn field_selectors_pick_by_prefix_as_xray() {
        let asked = RoutingContext {
            inbound_tag: "in".into(),
            target_domain: "a.test".into(),
            target_port: 443,
            source_port: 5000,
            ..Default::default()
        };
        let all = select_fields(&asked, "direct".into(), &[]);
        assert_eq!(all.inbound_tag, "in");
        assert_eq!(all.outbound_tag, "direct");
        assert_eq!(all.target_port, 443);
        let some = select_fields(
            &asked,
            "direct".into(),
            &["outbound".into(), "port_t".into()],
        );
        assert_eq!(some.inbound_tag, "");
        assert_eq!(some.source_port, 0);
        assert_eq!(some.target_port, 443);
        assert_eq!(some.outbound_tag, "direct");
    }
}
