//! `modelless status URL…`: what each replica of a fleet runs, from its
//! `GET /v2/policy`: the policy's digest, the tag it follows and how its polls went,
//! the watch of the last policy that went live, and the variants that follow tags.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use serde_json::Value;

#[derive(clap::Args)]
pub struct Args {
    /// The replicas' HTTP endpoints: `http://host:port` (or `host:port`).
    #[arg(required = true)]
    replicas: Vec<String>,
    /// Print each replica's answer as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut unreachable = 0;
    for replica in &args.replicas {
        match provenance(replica) {
            Ok(status) if args.json => println!("{}", serde_json::json!({ "replica": replica, "status": status })),
            Ok(status) => print!("{}", describe(replica, &status)),
            Err(error) => {
                unreachable += 1;
                println!("{replica}: {error:#}");
            }
        }
    }
    if unreachable > 0 {
        bail!("{unreachable} of {} replicas did not answer", args.replicas.len());
    }
    Ok(())
}

/// One replica's `GET /v2/policy`.
fn provenance(replica: &str) -> anyhow::Result<Value> {
    let address = replica.strip_prefix("http://").unwrap_or(replica).trim_end_matches('/');
    if address.contains("://") {
        bail!("only plain http:// endpoints are asked (a replica's own port, inside its network)");
    }
    let mut stream = TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET /v2/policy HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP answer")?;
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    if status != "200" {
        bail!("answered {status}: {body}");
    }
    Ok(serde_json::from_str(body)?)
}

/// A short digest: `sha256:` and 12 hex digits.
fn short(digest: &Value) -> String {
    digest.as_str().map_or_else(|| "-".into(), |d| d.chars().take(19).collect())
}

/// How long ago the Unix time `at` was.
fn ago(at: &Value) -> String {
    let Some(at) = at.as_f64() else { return "never".into() };
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    format!("{:.0} s ago", (now - at).max(0.0))
}

fn describe_source(source: &Value) -> String {
    let mut line = format!(
        "follows {} at {} since {}; last poll {}",
        source["reference"].as_str().unwrap_or("?"),
        short(&source["manifest"]),
        ago(&source["since_unix_s"]),
        ago(&source["last_poll_unix_s"]),
    );
    if let Some(error) = source["last_poll_error"].as_str() {
        line += &format!(", failing ({} failed): {error}", source["failed_polls"]);
    }
    if let Some(refused) = source["last_refused"].as_object() {
        line += &format!("; refused {}: {}", short(&refused["manifest"]), refused["reason"].as_str().unwrap_or("?"));
    }
    line
}

fn describe(replica: &str, status: &Value) -> String {
    let mut text = format!("{replica}\n");
    let policy = &status["policy"];
    if policy.is_null() {
        text += "  policy: none\n";
    } else {
        text += &format!(
            "  policy {} ({}){}\n",
            short(&policy["digest"]),
            policy["name"].as_str().unwrap_or("?"),
            if policy["on_fallback"] == true { ", on the fallback" } else { "" }
        );
        if !policy["source"].is_null() {
            text += &format!("    {}\n", describe_source(&policy["source"]));
        }
        let watch = &policy["watch"];
        if !watch.is_null() {
            text += &format!(
                "    watch of {} (replacing {}): {}{}\n",
                short(&watch["live"]),
                short(&watch["previous"]),
                watch["outcome"].as_str().unwrap_or("?"),
                watch["regression"].as_str().map(|why| format!(": {why}")).unwrap_or_default()
            );
        }
    }
    for variant in status["variants"].as_array().into_iter().flatten() {
        text += &format!(
            "  variant {}/{}: {}\n",
            variant["task"].as_str().unwrap_or("?"),
            variant["variant"].as_str().unwrap_or("?"),
            describe_source(&variant["source"])
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_s_answer_is_told_in_lines() {
        let status = serde_json::json!({
            "policy": {
                "name": "oci://r:5000/p:live", "digest": "sha256:0123456789abcdef0123", "on_fallback": false,
                "source": {
                    "reference": "oci://r:5000/p:live", "manifest": "sha256:fedcba9876543210aaaa",
                    "since_unix_s": 0.0, "last_poll_unix_s": null, "last_poll_error": "registry down",
                    "failed_polls": 3, "last_refused": null
                },
                "watch": { "live": "sha256:0123456789abcdef0123", "previous": "sha256:99", "outcome": "rolled back",
                           "regression": "90.00 % answered within the SLO" }
            },
            "variants": []
        });
        let text = describe("127.0.0.1:8080", &status);
        assert!(text.contains("policy sha256:0123456789ab (oci://r:5000/p:live)"), "{text}");
        assert!(text.contains("last poll never, failing (3 failed): registry down"), "{text}");
        assert!(text.contains("rolled back: 90.00 %"), "{text}");
        assert!(describe("x", &serde_json::json!({ "policy": null, "variants": [] })).contains("policy: none"));
    }
}
