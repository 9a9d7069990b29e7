//! The lab's tools against real iperf3 (root: each test makes its own namespaces).

use std::net::{IpAddr, Ipv4Addr};

use vrhost_lab::tools::{ToolError, iperf3};
use vrhost_lab::{Netns, require_root};

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[test]
fn iperf3_counts_what_the_server_received() {
    if !require_root("iperf3 tool test") {
        return;
    }
    let ns = Netns::new("ltool").unwrap();
    let bytes = iperf3(&ns, &ns, LOCAL, 1).unwrap();
    assert!(bytes > 1_000_000, "only {bytes} bytes over loopback");
}

/// iperf3 3.12 with `-J` exits 0 when it cannot connect: that must be an error, not a
/// missing number.
#[test]
fn iperf3_that_cannot_connect_is_an_error_saying_why() {
    if !require_root("iperf3 tool test") {
        return;
    }
    // The server listens in one namespace; the client tries its own loopback in another.
    let (client, server) = (Netns::new("ltool").unwrap(), Netns::new("ltool").unwrap());
    match iperf3(&client, &server, LOCAL, 1) {
        Err(ToolError::Failed { tool, output }) => {
            assert_eq!(tool, "iperf3");
            assert!(output.contains("refused"), "{output}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
