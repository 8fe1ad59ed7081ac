//! The query of a streaming request, read as the kubelet reads it: the remote-command options
//! of `/exec` and `/attach` (`remotecommand.NewOptions`), the ports of a WebSocket
//! `/portForward` (`portforward.NewV4Options`) and the `cmd` of `/run`.
//!
//! Owns the parsing and the kubelet's error texts. Must not do I/O.

/// A query as `(name, value)` pairs, in order, repeats kept (`command` repeats).
pub type Pairs = Vec<(String, String)>;

/// The pairs of a raw query string (`None`: no query).
pub fn pairs(query: Option<&str>) -> Pairs {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn first<'a>(q: &'a Pairs, name: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn all<'a>(q: &'a Pairs, name: &'a str) -> impl Iterator<Item = &'a str> {
    q.iter()
        .filter(move |(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Which standard streams a remote command gets (`input`, `output`, `error`, `tty` = `1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StreamOptions {
    /// `input=1`.
    pub stdin: bool,
    /// `output=1`.
    pub stdout: bool,
    /// `error=1`; always false with a TTY, which merges the two outputs.
    pub stderr: bool,
    /// `tty=1`.
    pub tty: bool,
}

/// The stream options of `/exec` or `/attach`, or the kubelet's 400 text.
pub fn stream_options(q: &Pairs) -> Result<StreamOptions, String> {
    let on = |name| first(q, name) == Some("1");
    let tty = on("tty");
    let opts = StreamOptions {
        stdin: on("input"),
        stdout: on("output"),
        // the kubelet drops stderr with a TTY rather than refuse
        stderr: on("error") && !tty,
        tty,
    };
    if !opts.stdin && !opts.stdout && !opts.stderr {
        return Err("you must specify at least 1 of stdin, stdout, stderr".into());
    }
    Ok(opts)
}

/// The command of `/exec`: every `command` value, in order.
pub fn exec_command(q: &Pairs) -> Vec<String> {
    all(q, "command").map(str::to_string).collect()
}

/// The command of `/run`: its one `cmd` value split on spaces (the kubelet's legacy form).
pub fn run_command(q: &Pairs) -> Vec<String> {
    first(q, "cmd")
        .unwrap_or_default()
        .split(' ')
        .map(str::to_string)
        .collect()
}

/// The ports of a WebSocket port-forward (`port=80&port=8080` or `port=80,8080`); SPDY
/// clients name theirs per stream, so theirs is empty. Errors are the kubelet's 400 texts.
pub fn port_forward_ports(q: &Pairs, websocket: bool) -> Result<Vec<i32>, String> {
    if !websocket {
        return Ok(Vec::new());
    }
    let values: Vec<&str> = all(q, "port").collect();
    if values.is_empty() {
        return Err("query parameter \"port\" is required".into());
    }
    let mut ports = Vec::new();
    for value in values {
        if value.is_empty() {
            return Err("query parameter \"port\" cannot be empty".into());
        }
        for p in value.split(',') {
            let port: u16 = p
                .parse()
                .map_err(|e| format!("unable to parse {value:?} as a port: {e}"))?;
            if port < 1 {
                return Err(format!("port {value:?} must be > 0"));
            }
            ports.push(i32::from(port));
        }
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Pairs {
        pairs(Some(s))
    }

    #[test]
    fn stream_options_need_one_stream_and_a_tty_drops_stderr() {
        assert_eq!(
            stream_options(&q("command=sh&input=1&output=1&error=1")),
            Ok(StreamOptions {
                stdin: true,
                stdout: true,
                stderr: true,
                tty: false
            })
        );
        assert_eq!(
            stream_options(&q("output=1&error=1&tty=1")),
            Ok(StreamOptions {
                stdin: false,
                stdout: true,
                stderr: false,
                tty: true
            })
        );
        assert_eq!(
            stream_options(&q("command=ls&output=true")),
            Err("you must specify at least 1 of stdin, stdout, stderr".into())
        );
        assert!(stream_options(&q("error=1&tty=1")).is_err());
    }

    #[test]
    fn exec_keeps_every_command_word_in_order_and_run_splits_on_spaces() {
        assert_eq!(
            exec_command(&q("command=sh&output=1&command=-c&command=echo%20a%20b")),
            ["sh", "-c", "echo a b"]
        );
        assert_eq!(
            run_command(&q("cmd=cat%20/etc/hostname")),
            ["cat", "/etc/hostname"]
        );
        assert_eq!(run_command(&q("")), [""]);
    }

    #[test]
    fn websocket_port_forward_needs_valid_ports_and_spdy_needs_none() {
        assert_eq!(port_forward_ports(&q(""), false), Ok(vec![]));
        assert_eq!(
            port_forward_ports(&q("port=80,8080&port=9090"), true),
            Ok(vec![80, 8080, 9090])
        );
        assert_eq!(
            port_forward_ports(&q(""), true),
            Err("query parameter \"port\" is required".into())
        );
        assert_eq!(
            port_forward_ports(&q("port="), true),
            Err("query parameter \"port\" cannot be empty".into())
        );
        assert_eq!(
            port_forward_ports(&q("port=0"), true),
            Err("port \"0\" must be > 0".into())
        );
        for bad in ["port=70000", "port=-1", "port=x", "port=80,"] {
            let e = port_forward_ports(&q(bad), true).unwrap_err();
            assert!(e.starts_with("unable to parse"), "{bad}: {e}");
        }
    }
}
