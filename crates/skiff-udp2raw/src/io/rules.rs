//! Firewall rules (`autoRule`, udp2raw's `-a`): placeholder filled in by a later step.
