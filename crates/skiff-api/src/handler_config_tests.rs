//! The handler configs Xray's CLI sends, built here field by field as its Build() code does,
//! and the JSON they come back as; malformed and unsupported ones refused by name.

use super::*;
use crate::handler_service::typed_message;
use crate::proto::net::PortRange;
use crate::proto::proxy::Shadowsocks2022Account;
use crate::proto::receiver::{MultiplexingConfig, ReceiverConfig, SenderConfig};
use crate::proto::stream::TransportConfig;

const ID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";

fn ip(octets: [u8; 4]) -> IpOrDomain {
    IpOrDomain {
        address: Some(ip_or_domain::Address::Ip(octets.to_vec())),
    }
}

fn port_list(from: u32, to: u32) -> PortList {
    PortList {
        range: vec![PortRange { from, to }],
    }
}

fn user(email: &str, account: TypedMessage) -> User {
    User {
        level: 0,
        email: email.into(),
        account: Some(account),
    }
}

fn vless_account() -> TypedMessage {
    typed_message(
        ty::VLESS_ACCOUNT,
        &VlessAccount {
            id: ID.into(),
            flow: "xtls-rprx-vision".into(),
            encryption: "none".into(),
        },
    )
}

fn tls_stream() -> StreamConfig {
    let tls = tls::Config {
        certificate: vec![tls::Certificate {
            certificate: b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec(),
            key: b"-----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----\n".to_vec(),
            certificate_path: "/etc/cert.pem".into(),
            key_path: "/etc/key.pem".into(),
            ..tls::Certificate::default()
        }],
        server_name: "example.com".into(),
        next_protocol: vec!["h2".into(), "http/1.1".into()],
        ..tls::Config::default()
    };
    StreamConfig {
        protocol_name: "tcp".into(),
        transport_settings: vec![TransportConfig {
            protocol_name: "tcp".into(),
            settings: Some(typed_message(ty::TCP, &tcp::Config::default())),
        }],
        security_type: ty::TLS.into(),
        security_settings: vec![typed_message(ty::TLS, &tls)],
        ..StreamConfig::default()
    }
}

fn inbound(receiver: ReceiverConfig, proxy: TypedMessage) -> InboundHandlerConfig {
    InboundHandlerConfig {
        tag: "in".into(),
        receiver_settings: Some(typed_message(ty::RECEIVER, &receiver)),
        proxy_settings: Some(proxy),
    }
}

fn vless_inbound(stream: Option<StreamConfig>) -> InboundHandlerConfig {
    inbound(
        ReceiverConfig {
            port_list: Some(port_list(8443, 8443)),
            listen: Some(ip([127, 0, 0, 1])),
            stream_settings: stream,
            ..ReceiverConfig::default()
        },
        typed_message(
            ty::VLESS_IN,
            &VlessInboundConfig {
                users: vec![user("a@b", vless_account())],
                decryption: "none".into(),
                ..VlessInboundConfig::default()
            },
        ),
    )
}

#[test]
fn a_vless_tls_inbound_becomes_its_config_object() {
    let json = inbound_json(&vless_inbound(Some(tls_stream()))).unwrap();
    assert_eq!(
        json,
        json!({
            "tag": "in",
            "listen": "127.0.0.1",
            "port": 8443,
            "protocol": "vless",
            "settings": {
                "clients": [{"id": ID, "flow": "xtls-rprx-vision", "email": "a@b", "level": 0}],
                "decryption": "none",
            },
            "streamSettings": {
                "network": "raw",
                "rawSettings": {"acceptProxyProtocol": false},
                "security": "tls",
                "tlsSettings": {
                    "certificates": [{
                        "certificate": ["-----BEGIN CERTIFICATE-----", "AAAA", "-----END CERTIFICATE-----"],
                        "key": ["-----BEGIN PRIVATE KEY-----", "BBBB", "-----END PRIVATE KEY-----"],
                    }],
                    "serverName": "example.com",
                    "alpn": ["h2", "http/1.1"],
                },
            },
        })
    );
}

#[test]
fn a_certificate_sent_by_path_only_stays_a_path() {
    let mut stream = tls_stream();
    let mut tls: tls::Config = decode(&stream.security_settings[0]).unwrap();
    tls.certificate[0].certificate.clear();
    tls.certificate[0].key.clear();
    stream.security_settings = vec![typed_message(ty::TLS, &tls)];
    let json = inbound_json(&vless_inbound(Some(stream))).unwrap();
    assert_eq!(
        json["streamSettings"]["tlsSettings"]["certificates"],
        json!([{"certificateFile": "/etc/cert.pem", "keyFile": "/etc/key.pem"}])
    );
}

#[test]
fn trojan_shadowsocks_and_tunnel_inbounds_keep_their_settings() {
    let trojan = inbound(
        ReceiverConfig {
            port_list: Some(PortList {
                range: vec![
                    PortRange {
                        from: 1000,
                        to: 1002,
                    },
                    PortRange {
                        from: 2000,
                        to: 2000,
                    },
                ],
            }),
            ..ReceiverConfig::default()
        },
        typed_message(
            ty::TROJAN_IN,
            &TrojanServerConfig {
                users: vec![user(
                    "t@x",
                    typed_message(
                        ty::TROJAN_ACCOUNT,
                        &TrojanAccount {
                            password: "pw".into(),
                        },
                    ),
                )],
                fallbacks: vec![Fallback {
                    dest: "localhost:80".into(),
                    ..Fallback::default()
                }],
            },
        ),
    );
    let json = inbound_json(&trojan).unwrap();
    assert_eq!(json["port"], "1000-1002,2000");
    assert!(json.get("listen").is_none());
    assert_eq!(json["settings"]["clients"][0]["password"], "pw");
    assert_eq!(json["settings"]["fallbacks"][0]["dest"], "localhost:80");

    let ss = inbound(
        ReceiverConfig {
            port_list: Some(port_list(9000, 9000)),
            ..ReceiverConfig::default()
        },
        typed_message(
            ty::SS_IN,
            &ShadowsocksServerConfig {
                users: vec![user(
                    "s@x",
                    typed_message(
                        ty::SS_ACCOUNT,
                        &ShadowsocksAccount {
                            password: "p".into(),
                            cipher_type: 7,
                            iv_check: false,
                        },
                    ),
                )],
                network: vec![Network::Tcp as i32, Network::Udp as i32],
            },
        ),
    );
    let json = inbound_json(&ss).unwrap();
    assert_eq!(
        json["settings"],
        json!({"method": "chacha20-poly1305", "password": "p", "email": "s@x", "level": 0, "network": "tcp,udp"})
    );

    let ss2022 = inbound(
        ReceiverConfig {
            port_list: Some(port_list(9001, 9001)),
            ..ReceiverConfig::default()
        },
        typed_message(
            ty::SS2022_MULTI_IN,
            &Shadowsocks2022MultiUserServerConfig {
                method: "2022-blake3-aes-128-gcm".into(),
                key: "AAAAAAAAAAAAAAAAAAAAAA==".into(),
                users: vec![user(
                    "u@x",
                    typed_message(
                        ty::SS2022_ACCOUNT,
                        &Shadowsocks2022Account {
                            key: "AQEBAQEBAQEBAQEBAQEBAQ==".into(),
                        },
                    ),
                )],
                network: vec![Network::Tcp as i32],
            },
        ),
    );
    let json = inbound_json(&ss2022).unwrap();
    assert_eq!(
        json["settings"]["clients"][0]["password"],
        "AQEBAQEBAQEBAQEBAQEBAQ=="
    );
    assert_eq!(json["settings"]["network"], "tcp");

    let tunnel = inbound(
        ReceiverConfig {
            port_list: Some(port_list(9002, 9002)),
            ..ReceiverConfig::default()
        },
        typed_message(
            ty::DOKODEMO,
            &DokodemoConfig {
                rewrite_address: Some(IpOrDomain {
                    address: Some(ip_or_domain::Address::Domain("example.com".into())),
                }),
                rewrite_port: 443,
                allowed_networks: vec![Network::Tcp as i32],
                ..DokodemoConfig::default()
            },
        ),
    );
    let json = inbound_json(&tunnel).unwrap();
    assert_eq!(json["protocol"], "dokodemo-door");
    assert_eq!(json["settings"]["address"], "example.com");
    assert_eq!(json["settings"]["port"], 443);
}

#[test]
fn a_websocket_stream_gets_its_early_data_back_in_the_path() {
    let stream = StreamConfig {
        protocol_name: "websocket".into(),
        transport_settings: vec![TransportConfig {
            protocol_name: "websocket".into(),
            settings: Some(typed_message(
                ty::WEBSOCKET,
                &websocket::Config {
                    path: "/ws".into(),
                    host: "h.example".into(),
                    ed: 2048,
                    ..websocket::Config::default()
                },
            )),
        }],
        ..StreamConfig::default()
    };
    let json = inbound_json(&vless_inbound(Some(stream))).unwrap();
    assert_eq!(json["streamSettings"]["network"], "ws");
    assert_eq!(json["streamSettings"]["security"], "none");
    assert_eq!(json["streamSettings"]["wsSettings"]["path"], "/ws?ed=2048");
    assert_eq!(json["streamSettings"]["wsSettings"]["host"], "h.example");
}

#[test]
fn outbounds_become_their_config_objects() {
    let vless = OutboundHandlerConfig {
        tag: "out".into(),
        sender_settings: Some(typed_message(
            ty::SENDER,
            &SenderConfig {
                stream_settings: Some(tls_stream()),
                multiplex_settings: Some(MultiplexingConfig {
                    enabled: false,
                    ..MultiplexingConfig::default()
                }),
                ..SenderConfig::default()
            },
        )),
        proxy_settings: Some(typed_message(
            ty::VLESS_OUT,
            &VlessOutboundConfig {
                vnext: Some(ServerEndpoint {
                    address: Some(ip([127, 0, 0, 1])),
                    port: 443,
                    user: Some(user("", vless_account())),
                }),
            },
        )),
        ..OutboundHandlerConfig::default()
    };
    let json = outbound_json(&vless).unwrap();
    assert_eq!(json["protocol"], "vless");
    assert_eq!(
        json["settings"]["vnext"][0],
        json!({"address": "127.0.0.1", "port": 443, "users": [
            {"id": ID, "flow": "xtls-rprx-vision", "level": 0, "encryption": "none"}
        ]})
    );
    assert_eq!(json["streamSettings"]["security"], "tls");
    assert!(json.get("mux").is_none());

    let freedom = OutboundHandlerConfig {
        tag: "direct".into(),
        sender_settings: Some(typed_message(ty::SENDER, &SenderConfig::default())),
        proxy_settings: Some(typed_message(
            ty::FREEDOM,
            &FreedomConfig {
                domain_strategy: 1,
                ..FreedomConfig::default()
            },
        )),
        ..OutboundHandlerConfig::default()
    };
    let json = outbound_json(&freedom).unwrap();
    assert_eq!(json["protocol"], "freedom");
    assert_eq!(json["settings"]["domainStrategy"], "UseIP");

    let trojan = OutboundHandlerConfig {
        tag: "t".into(),
        proxy_settings: Some(typed_message(
            ty::TROJAN_OUT,
            &ServerClientConfig {
                server: Some(ServerEndpoint {
                    address: Some(IpOrDomain {
                        address: Some(ip_or_domain::Address::Domain("srv.example".into())),
                    }),
                    port: 8443,
                    user: Some(user(
                        "",
                        typed_message(
                            ty::TROJAN_ACCOUNT,
                            &TrojanAccount {
                                password: "pw".into(),
                            },
                        ),
                    )),
                }),
            },
        )),
        ..OutboundHandlerConfig::default()
    };
    let json = outbound_json(&trojan).unwrap();
    assert_eq!(
        json["settings"]["servers"][0],
        json!({"address": "srv.example", "port": 8443, "password": "pw", "level": 0})
    );
    let blackhole = OutboundHandlerConfig {
        proxy_settings: Some(typed_message(
            ty::BLACKHOLE,
            &BlackholeConfig {
                response: Some(typed_message(ty::BLACKHOLE_HTTP, &())),
            },
        )),
        ..OutboundHandlerConfig::default()
    };
    assert_eq!(
        outbound_json(&blackhole).unwrap()["settings"]["response"]["type"],
        "http"
    );
}

fn is_unsupported(r: Result<Value, ConfigError>, naming: &str) {
    match r {
        Err(ConfigError::Unsupported(what)) => assert!(what.contains(naming), "{what}"),
        other => panic!("expected unsupported {naming}: {other:?}"),
    }
}

fn is_malformed(r: Result<Value, ConfigError>) {
    assert!(matches!(r, Err(ConfigError::Malformed(_))), "{r:?}");
}

#[test]
fn what_skiff_does_not_run_is_refused_by_name() {
    let mut stream = tls_stream();
    stream.security_type = ty::REALITY.into();
    is_unsupported(inbound_json(&vless_inbound(Some(stream))), "REALITY");

    let mut stream = tls_stream();
    stream.protocol_name = "grpc".into();
    is_unsupported(inbound_json(&vless_inbound(Some(stream))), "grpc");

    let mut stream = tls_stream();
    stream.socket_settings = vec![0x60, 1];
    is_unsupported(inbound_json(&vless_inbound(Some(stream))), "sockopt");

    let mut stream = tls_stream();
    stream.transport_settings[0].settings = Some(typed_message(
        ty::TCP,
        &tcp::Config {
            header_settings: Some(typed_message(
                "xray.transport.internet.headers.http.Config",
                &(),
            )),
            accept_proxy_protocol: false,
        },
    ));
    is_unsupported(inbound_json(&vless_inbound(Some(stream))), "header");

    let mut config = vless_inbound(None);
    config.proxy_settings = Some(typed_message("xray.proxy.hysteria.ServerConfig", &()));
    is_unsupported(inbound_json(&config), "hysteria");

    let mut config = vless_inbound(None);
    config.proxy_settings = Some(typed_message(
        ty::VLESS_IN,
        &VlessInboundConfig {
            decryption: "mlkem768x25519plus.native.600s.abc".into(),
            ..VlessInboundConfig::default()
        },
    ));
    is_unsupported(inbound_json(&config), "VLESS encryption");

    let mut config = vless_inbound(None);
    config.receiver_settings = Some(typed_message(
        ty::RECEIVER,
        &ReceiverConfig {
            listen: Some(IpOrDomain {
                address: Some(ip_or_domain::Address::Domain("/run/x.sock".into())),
            }),
            ..ReceiverConfig::default()
        },
    ));
    is_unsupported(inbound_json(&config), "/run/x.sock");

    let freedom = OutboundHandlerConfig {
        proxy_settings: Some(typed_message(
            ty::FREEDOM,
            &FreedomConfig {
                fragment: vec![8, 1],
                ..FreedomConfig::default()
            },
        )),
        ..OutboundHandlerConfig::default()
    };
    is_unsupported(outbound_json(&freedom), "fragment");
    let wireguard = OutboundHandlerConfig {
        proxy_settings: Some(typed_message("xray.proxy.wireguard.DeviceConfig", &())),
        ..OutboundHandlerConfig::default()
    };
    is_unsupported(outbound_json(&wireguard), "wireguard");
}

#[test]
fn malformed_configs_are_refused_without_panicking() {
    // Nothing at all, and pieces missing.
    is_malformed(inbound_json(&InboundHandlerConfig::default()));
    is_malformed(outbound_json(&OutboundHandlerConfig::default()));
    let mut config = vless_inbound(None);
    config.proxy_settings = None;
    is_malformed(inbound_json(&config));
    // No port.
    let mut config = vless_inbound(None);
    config.receiver_settings = Some(typed_message(ty::RECEIVER, &ReceiverConfig::default()));
    is_malformed(inbound_json(&config));
    // A port beyond 65535 and a reversed range.
    for (from, to) in [(70_000, 70_000), (10, 5)] {
        let mut config = vless_inbound(None);
        config.receiver_settings = Some(typed_message(
            ty::RECEIVER,
            &ReceiverConfig {
                port_list: Some(port_list(from, to)),
                ..ReceiverConfig::default()
            },
        ));
        is_malformed(inbound_json(&config));
    }
    // An address of 5 bytes.
    let mut config = vless_inbound(None);
    config.receiver_settings = Some(typed_message(
        ty::RECEIVER,
        &ReceiverConfig {
            port_list: Some(port_list(1, 1)),
            listen: Some(IpOrDomain {
                address: Some(ip_or_domain::Address::Ip(vec![1, 2, 3, 4, 5])),
            }),
            ..ReceiverConfig::default()
        },
    ));
    is_malformed(inbound_json(&config));
    // Bytes that are not the message their type names: truncated and garbage.
    let good = vless_inbound(Some(tls_stream()));
    let receiver = good.receiver_settings.clone().unwrap();
    for cut in [1, receiver.value.len() / 2, receiver.value.len() - 1] {
        let mut config = good.clone();
        config.receiver_settings = Some(TypedMessage {
            r#type: receiver.r#type.clone(),
            value: receiver.value[..cut].to_vec(),
        });
        is_malformed(inbound_json(&config));
    }
    let mut config = good.clone();
    config.proxy_settings = Some(TypedMessage {
        r#type: ty::VLESS_IN.into(),
        value: vec![0xff; 12],
    });
    is_malformed(inbound_json(&config));
    // The receiver named as something else.
    let mut config = good.clone();
    config.receiver_settings.as_mut().unwrap().r#type = "xray.app.proxyman.SenderConfig".into();
    is_malformed(inbound_json(&config));
    // A user whose account is another protocol's.
    let mut config = good.clone();
    config.proxy_settings = Some(typed_message(
        ty::VLESS_IN,
        &VlessInboundConfig {
            users: vec![user(
                "x",
                typed_message(ty::TROJAN_ACCOUNT, &TrojanAccount::default()),
            )],
            ..VlessInboundConfig::default()
        },
    ));
    is_malformed(inbound_json(&config));
    // A server without an address or port.
    let vless = OutboundHandlerConfig {
        proxy_settings: Some(typed_message(
            ty::VLESS_OUT,
            &VlessOutboundConfig {
                vnext: Some(ServerEndpoint::default()),
            },
        )),
        ..OutboundHandlerConfig::default()
    };
    is_malformed(outbound_json(&vless));
    // Every truncation of a whole handler decodes to an error or to JSON, never a panic.
    let wire = good.encode_to_vec();
    for cut in 0..wire.len() {
        if let Ok(config) = InboundHandlerConfig::decode(&wire[..cut]) {
            let _ = inbound_json(&config);
        }
    }
}
