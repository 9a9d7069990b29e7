//! `vrbench inproc` refuses bad arguments with an error that names the argument (exit status
//! non-zero, no panic), before it builds any table.

use std::process::Command;

/// Run `vrbench inproc ARGS` and return its stderr, checking that it failed cleanly.
#[track_caller]
fn refused(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_vrbench"))
        .arg("inproc")
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run vrbench");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{args:?} was accepted:\n{err}");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    err
}

#[test]
fn bad_arguments_are_refused_by_name() {
    for (args, names) in [
        (&["--vrs", "0"][..], "--vrs 0"),
        (&["--vrs", "5000"], "--vrs 5000"),
        (&["--frame-size", "30"], "--frame-size 30"),
        (&["--frame-size", "9000"], "--frame-size 9000"),
        (&["--workers", "0"], "--workers 0"),
        (&["--workers", "2", "--vrs", "1"], "--workers 2"),
        (&["--flows", "0"], "--flows 0"),
        (&["--gen-queues", "0"], "--gen-queues 0"),
        (&["--rx-ring", "10"], "--rx-ring 10"),
        (&["--dest", "bogus"], "--dest"),
        (&["--seconds", "nan"], "--seconds"),
        (&["--seconds", "inf"], "--seconds"),
        (&["--warmup=-1"], "--warmup"),
        (&["--rate", "nan"], "--rate"),
    ] {
        let err = refused(args);
        assert!(
            err.contains(names),
            "{args:?}: the error does not name {names}:\n{err}"
        );
    }
}
