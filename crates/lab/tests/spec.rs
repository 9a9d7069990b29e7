//! Bad lab specs are refused with an error naming the field, before anything is created.

use vrhost_lab::{Forwarder, Lab, LabError, LabSpec, MAX_QUEUES, MAX_VRS};

fn refused(spec: &LabSpec, field: &str) {
    match Lab::up(spec) {
        Err(LabError::Spec { field: f, reason }) => {
            assert_eq!(f, field, "{spec:?}: {reason}");
            assert!(!reason.is_empty());
        }
        Err(e) => panic!("{spec:?}: wrong error {e}"),
        Ok(_) => panic!("{spec:?} was accepted"),
    }
    assert!(spec.validate().is_err());
    // Nothing was created (a refused prefix cannot even be listed).
    if let Ok(names) = Lab::namespaces_of(&spec.prefix) {
        assert!(names.is_empty(), "{spec:?} left {names:?}");
    }
}

#[test]
fn bad_specs_are_refused_before_anything_is_created() {
    let ok = LabSpec::unique("lspec");
    assert!(ok.validate().is_ok());
    refused(&ok.clone().vrs(0), "vrs");
    refused(&ok.clone().vrs(MAX_VRS + 1), "vrs");
    refused(&ok.clone().queues(0), "queues");
    refused(&ok.clone().queues(MAX_QUEUES + 1), "queues");
    refused(&ok.clone().forwarder(Forwarder::KernelPlain).vrs(2), "vrs");
    for bad in ["", "a b", "-x", ".x", "x/y", "ünï", &"x".repeat(65)] {
        refused(&LabSpec::new(bad), "prefix");
    }
    assert!(matches!(
        Lab::down(""),
        Err(LabError::Spec {
            field: "prefix",
            ..
        })
    ));
    assert!(matches!(
        Lab::attach("a/b"),
        Err(LabError::Spec {
            field: "prefix",
            ..
        })
    ));
    // The edges are accepted.
    assert!(
        ok.clone()
            .vrs(MAX_VRS)
            .queues(MAX_QUEUES)
            .validate()
            .is_ok()
    );
    assert!(LabSpec::new("x".repeat(64)).validate().is_ok());
}

#[test]
fn forwarder_names_round_trip() {
    for f in [Forwarder::Vrhost, Forwarder::Kernel, Forwarder::KernelPlain] {
        assert_eq!(f.name().parse::<Forwarder>().unwrap(), f);
    }
    assert!(matches!(
        "linux".parse::<Forwarder>(),
        Err(LabError::Spec {
            field: "forwarder",
            ..
        })
    ));
}
