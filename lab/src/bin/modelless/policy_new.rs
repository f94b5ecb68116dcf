//! `modelless policy new --lang L NAME`: a starter policy in language L, in the folder
//! NAME, that builds with `./build.sh` into `NAME.wasm` and passes `policy check`. It
//! carries its language's kit (the glue, and the types generated from the schema), so
//! that it builds outside this repository; the toolchains are the ones
//! `scripts/setup/policy_toolchains.sh` installs (`MODELLESS_TOOLCHAINS` names their
//! folder; by default this checkout's `.modelless/toolchains`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// A language a policy can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    Python,
    Typescript,
    Go,
    Zig,
    Assemblyscript,
    C,
    Rust,
}

const WIT: &str = include_str!("../../../../policy-abi/wit/policy.wit");
const PYTHON_KIT: &str = include_str!("../../../../policies-wasm/python/modelless_policy/__init__.py");
const PYTHON_TYPES: &str = include_str!("../../../../policies-wasm/python/modelless_policy/types.py");
const PYTHON_RULES: &str = include_str!("../../../../policies-wasm/python/modelless_policy/rules.py");
const TS_KIT: &str = include_str!("../../../../policies-wasm/typescript/kit/policy.ts");
const TS_TYPES: &str = include_str!("../../../../policies-wasm/typescript/kit/types.ts");
const TS_HOST: &str = include_str!("../../../../policies-wasm/typescript/kit/host.d.ts");
const TS_RULES: &str = include_str!("../../../../policies-wasm/typescript/kit/rules.ts");
const GO_KIT: &str = include_str!("../../../../policies-wasm/go/policy/abi.go");
const GO_TYPES: &str = include_str!("../../../../policies-wasm/go/policy/types.go");
const GO_RULES: &str = include_str!("../../../../policies-wasm/go/policy/rules.go");
const ZIG_KIT: &str = include_str!("../../../../policies-wasm/zig/kit/policy.zig");
const ZIG_TYPES: &str = include_str!("../../../../policies-wasm/zig/kit/types.zig");
const ZIG_RULES: &str = include_str!("../../../../policies-wasm/zig/kit/rules.zig");
const AS_KIT: &str = include_str!("../../../../policies-wasm/assemblyscript/kit/policy.ts");
const AS_RULES: &str = include_str!("../../../../policies-wasm/assemblyscript/kit/rules.ts");

/// The toolchains' folder `build.sh` uses unless `MODELLESS_TOOLCHAINS` is set.
fn default_toolchains() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.modelless/toolchains")
}

/// The files of a starter policy named `name`, by path within its folder.
fn files(language: Language, name: &str) -> Vec<(&'static str, String)> {
    let crate_name = name.replace('-', "_");
    let header = "#!/usr/bin/env bash\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n";
    let tools = format!("T=\"${{MODELLESS_TOOLCHAINS:-{}}}\"\n", default_toolchains().display());
    let starter = |template: &str| template.replace("{NAME}", name);
    match language {
        Language::Python => vec![
            ("app.py", starter(include_str!("policy_new/python_app.py"))),
            ("modelless_policy/__init__.py", PYTHON_KIT.into()),
            ("modelless_policy/types.py", PYTHON_TYPES.into()),
            ("modelless_policy/rules.py", PYTHON_RULES.into()),
            ("wit/policy.wit", WIT.into()),
            (
                "build.sh",
                format!(
                    "{header}{tools}# --stub-wasi: no WASI imports, which the host does not give.\n\
                     \"$T/py/bin/componentize-py\" -d wit -w policy componentize --stub-wasi -p . app -o {name}.wasm\n"
                ),
            ),
        ],
        Language::Typescript => vec![
            ("policy.ts", starter(include_str!("policy_new/typescript_policy.ts"))),
            ("kit/policy.ts", TS_KIT.into()),
            ("kit/types.ts", TS_TYPES.into()),
            ("kit/host.d.ts", TS_HOST.into()),
            ("kit/rules.ts", TS_RULES.into()),
            ("wit/policy.wit", WIT.into()),
            (
                "build.sh",
                format!(
                    "{header}{tools}B=\"$T/npm/node_modules/.bin\"\n\
                     \"$B/tsc\" --outDir build --rootDir . --target es2022 --module esnext --moduleResolution bundler \
                     --strict --skipLibCheck policy.ts kit/host.d.ts\n\
                     \"$B/rolldown\" build/policy.js --format esm --file build/bundle.js \
                     --external 'modelless:policy/host@1.0.0'\n\
                     # Every WASI feature of the engine disabled: the host gives none.\n\
                     \"$B/componentize-js\" build/bundle.js --wit wit --world-name policy --out {name}.wasm \
                     --disable stdio random clocks http fetch-event\n"
                ),
            ),
        ],
        Language::Go => vec![
            ("main.go", starter(include_str!("policy_new/go_main.go"))),
            ("policy/abi.go", GO_KIT.into()),
            ("policy/types.go", GO_TYPES.into()),
            ("policy/rules.go", GO_RULES.into()),
            ("go.mod", format!("module {name}\n\ngo 1.24\n")),
            (
                "build.sh",
                format!(
                    "{header}{tools}# A reactor (c-shared) for wasip1, whose imports the host links to nothing.\n\
                     GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local GOCACHE=\"$T/go-cache\" GOPATH=\"$T/go-path\" \
                     \"$T/py/bin/go\" build -buildmode=c-shared -trimpath -o {name}.wasm .\n"
                ),
            ),
        ],
        Language::Zig => vec![
            ("policy.zig", starter(include_str!("policy_new/zig_policy.zig"))),
            ("kit/policy.zig", ZIG_KIT.into()),
            ("kit/types.zig", ZIG_TYPES.into()),
            ("kit/rules.zig", ZIG_RULES.into()),
            (
                "build.sh",
                format!(
                    "{header}{tools}ZIG_GLOBAL_CACHE_DIR=\"$T/zig-cache\" ZIG_LOCAL_CACHE_DIR=\"$T/zig-cache\" \
                     \"$T/py/bin/python\" -m ziglang build-exe -target wasm32-freestanding -O ReleaseSmall -fno-entry \
                     -rdynamic --dep kit -Mroot=policy.zig -Mkit=kit/policy.zig -femit-bin={name}.wasm\n"
                ),
            ),
        ],
        Language::Assemblyscript => vec![
            ("policy.ts", starter(include_str!("policy_new/assemblyscript_policy.ts"))),
            ("kit/policy.ts", AS_KIT.into()),
            ("kit/rules.ts", AS_RULES.into()),
            (
                "build.sh",
                format!(
                    "{header}{tools}HERE=\"$PWD\"\n\
                     # json-as resolves from the toolchains' node_modules; no `env.abort` import.\n\
                     (cd \"$T/npm\" && node_modules/.bin/asc \"$HERE/policy.ts\" --outFile \"$HERE/{name}.wasm\" \
                     --optimize --runtime incremental --exportRuntime --use abort= --transform json-as/transform)\n"
                ),
            ),
        ],
        Language::C => vec![
            ("policy.c", starter(include_str!("policy_new/c_policy.c"))),
            (
                "build.sh",
                format!(
                    "{header}# Debian: clang lld.\nclang --target=wasm32-unknown-unknown -O2 -nostdlib \
                     -Wl,--no-entry -Wall -Werror -o {name}.wasm policy.c\n"
                ),
            ),
        ],
        Language::Rust => vec![
            ("src/lib.rs", starter(include_str!("policy_new/rust_lib.rs"))),
            (
                "Cargo.toml",
                format!(
                    "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[lib]\n\
                     crate-type = [\"cdylib\", \"rlib\"]\n\n[dependencies]\n\
                     modelless-policy-abi = {{ path = \"{}\", features = [\"guest\"] }}\nlog = \"0.4\"\n\
                     schemars = \"1\"\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\n[workspace]\n",
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy-abi").display()
                ),
            ),
            (
                "build.sh",
                format!(
                    "{header}cargo build --quiet --release --target wasm32-unknown-unknown --target-dir target\n\
                     cp target/wasm32-unknown-unknown/release/{crate_name}.wasm {name}.wasm\n"
                ),
            ),
        ],
    }
}

/// Writes the starter policy `name` in `language` into the folder `name` (which must
/// not exist yet) under `parent`; returns the folder.
pub fn write(language: Language, name: &str, parent: &Path) -> anyhow::Result<PathBuf> {
    anyhow::ensure!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "a policy's name is letters, digits, `-` and `_`: {name:?}"
    );
    let dir = parent.join(name);
    anyhow::ensure!(!dir.exists(), "{} exists already", dir.display());
    for (file, text) in files(language, name) {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap_or(&dir))?;
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        if file == "build.sh" {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(dir)
}
