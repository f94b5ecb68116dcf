//! `modelless policy dev` on a Rust policy: a save rebuilds it, the build decides as
//! a shadow beside the live policy (its differing decisions printed), goes live, and
//! the server it runs then serves as the new module decides.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{crate_dir, models_dir};
use crate::policy_new::modelless;

/// Longest the first build (the starter's dependencies compiled) may take.
const FIRST_BUILD: Duration = Duration::from_secs(400);
/// Longest a rebuild, the shadow and going live may take.
const REBUILD: Duration = Duration::from_secs(120);

/// The `policy dev` process, stopped when dropped, and the lines it printed.
struct Dev {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dev {
    fn start(config: &Path, source: &Path) -> Dev {
        let mut child = Command::new(modelless())
            .args(["policy", "dev", "--live-after", "2", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
            .arg("--config")
            .arg(config)
            .arg("--source")
            .arg(source)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).for_each(|l| kept.lock().unwrap().push(l)));
        Dev { child, lines }
    }

    /// The first line after the first `skip` that starts with `prefix`, within `limit`.
    fn line(&self, prefix: &str, skip: usize, limit: Duration) -> String {
        let started = Instant::now();
        loop {
            let lines = self.lines.lock().unwrap().clone();
            if let Some(line) = lines.iter().skip(skip).find(|l| l.starts_with(prefix)) {
                return line.clone();
            }
            assert!(started.elapsed() < limit, "no `{prefix}` line within {limit:?}:\n{}", lines.join("\n"));
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn printed(&self) -> usize {
        self.lines.lock().unwrap().len()
    }
}

fn metrics(http: SocketAddr) -> String {
    let mut stream = TcpStream::connect(http).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn a_saved_rust_policy_is_rebuilt_shadowed_and_made_live() {
    let dir = tempfile::tempdir().unwrap();
    let models = models_dir();
    let config = dir.path().join("config.toml");
    let live = crate_dir().join("../.modelless/policies/static.wasm");
    std::fs::write(
        &config,
        format!(
            "[[tasks]]\nname = \"classify\"\nlatency_slo_ms = 500\n\n[[tasks.variants]]\nname = \"small\"\n\
             path = \"{}\"\naccuracy = 60.3\npreload = true\n\n[[tasks.variants]]\nname = \"larger\"\n\
             path = \"{}\"\naccuracy = 65.4\n\n[policy]\nmodule = \"{}\"\ntick_ms = 100\n",
            models.join("mobilenetv2_0.35.onnx").display(),
            models.join("mobilenetv2_0.5.onnx").display(),
            live.display()
        ),
    )
    .unwrap();
    let wrote = Command::new(modelless())
        .args(["policy", "new", "--lang", "rust", "devpol", "--parent"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(wrote.status.success(), "{}", String::from_utf8_lossy(&wrote.stderr));
    let source = dir.path().join("devpol");
    let dev = Dev::start(&config, &source);
    let serving = dev.line("serving: ", 0, Duration::from_secs(60));
    let http: SocketAddr = serving.split("/metrics on ").nth(1).unwrap().trim().parse().unwrap();
    let first = dev.line("live: sha256:", 0, FIRST_BUILD);

    // A save that makes it switch `classify` to `larger`.
    let lib = source.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    let switching = text.replace(
        "        Ok(Decision::default())",
        "        let switch = |t: &modelless_policy_abi::TaskSnapshot| {\n            \
         modelless_policy_abi::TaskDecision::switch(&t.name, \"larger\")\n        };\n        \
         Ok(Decision { tasks: snapshot.tasks.iter().filter(|t| t.active.variant != \"larger\").map(switch).collect() })",
    );
    assert_ne!(switching, text, "the starter's decide changed");
    let before = dev.printed();
    std::fs::write(&lib, switching).unwrap();
    let shadow = dev.line("shadow: ", before, REBUILD);
    assert!(shadow.contains("s from the save)"), "{shadow}");
    let differs = dev.line("tick ", before, REBUILD);
    assert!(
        differs.contains(r#"live {"tasks":[]} | shadow {"tasks":[{"task":"classify","variant":"larger"}]}"#),
        "{differs}"
    );
    let second = dev.line("live: sha256:", before, REBUILD);
    assert_ne!(first.split(' ').nth(1), second.split(' ').nth(1), "a new digest: {first} / {second}");
    // The server now serves as the new module decides, and its metrics name it.
    let digest = second.split(' ').nth(1).unwrap();
    let started = Instant::now();
    while !metrics(http).contains(r#"modelless_task_active_variant{task="classify",variant="larger"} 1"#) {
        assert!(started.elapsed() < REBUILD, "classify never switched to `larger`");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(metrics(http).contains(&format!("policy_digest=\"{digest}\"")));
}
