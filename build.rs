//! Builds `native/isolet_v8.cc` against the V8 headers of the Node that will load the
//! addon. The Node is `ISOLET_NODE` (a path to a `node` binary), else the one npm runs
//! (`npm_node_execpath`), else `node` on PATH. Headers come from `ISOLET_NODE_INCLUDE`,
//! else `<node prefix>/include/node`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

struct NodeInfo {
    exec_path: PathBuf,
    version: String,
    abi: String,
    major: u32,
    /// Preprocessor macros that change V8's object layout, derived exactly as
    /// node-gyp derives them from `process.config.variables` (see common.gypi).
    defines: Vec<&'static str>,
}

const PROBE: &str = r#"const v = process.config.variables;
console.log(JSON.stringify({
  execPath: process.execPath, version: process.versions.node, abi: process.versions.modules,
  pc: v.v8_enable_pointer_compression, pcShared: v.v8_enable_pointer_compression_shared_cage,
  smi31: v.v8_enable_31bit_smis_on_64bit_arch, sandbox: v.v8_enable_sandbox,
  checks: v.v8_enable_v8_checks, zones: v.v8_enable_zone_compression,
  extCode: v.v8_enable_external_code_space, directLocal: v.v8_enable_direct_local,
  css: v.v8_enable_conservative_stack_scanning, mapPacking: v.v8_enable_map_packing }))"#;

fn probe_node() -> NodeInfo {
    // A Node that cannot run here (macOS, for a cross build): scripts/prebuild.js passes
    // what PROBE would print, read from that Node's config.gypi and node_version.h.
    if let Ok(answer) = env::var("ISOLET_NODE_PROBE") {
        return node_info(serde_json::from_str(&answer).expect("ISOLET_NODE_PROBE is the probe's JSON"));
    }
    let node = env::var("ISOLET_NODE").or_else(|_| env::var("npm_node_execpath")).unwrap_or_else(|_| "node".to_string());
    let out = Command::new(&node).arg("-e").arg(PROBE).output().unwrap_or_else(|e| {
        panic!(
            "isolet build: could not run Node at `{node}` ({e}). Install Node.js >= 20 or set \
             ISOLET_NODE to the node binary the addon is for."
        )
    });
    if !out.status.success() {
        panic!("isolet build: `{node} -e` failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    node_info(serde_json::from_slice(&out.stdout).expect("node probe output"))
}

fn node_info(v: serde_json::Value) -> NodeInfo {
    let on = |k: &str| v[k].as_u64() == Some(1) || v[k].as_bool() == Some(true);
    let mut defines = Vec::new();
    if on("checks") {
        defines.push("V8_ENABLE_CHECKS");
    }
    if on("pc") {
        defines.push("V8_COMPRESS_POINTERS");
        defines.push(if on("pcShared") { "V8_COMPRESS_POINTERS_IN_SHARED_CAGE" } else { "V8_COMPRESS_POINTERS_IN_ISOLATE_CAGE" });
    }
    if on("pc") || on("smi31") {
        defines.push("V8_31BIT_SMIS_ON_64BIT_ARCH");
    }
    if on("zones") {
        defines.push("V8_COMPRESS_ZONES");
    }
    if on("sandbox") {
        defines.push("V8_ENABLE_SANDBOX");
    }
    if on("extCode") {
        defines.push("V8_EXTERNAL_CODE_SPACE");
    }
    if on("directLocal") {
        defines.push("V8_ENABLE_DIRECT_LOCAL");
    }
    if on("css") {
        defines.push("V8_ENABLE_CONSERVATIVE_STACK_SCANNING");
    }
    if on("mapPacking") {
        defines.push("V8_MAP_PACKING");
    }
    let version = v["version"].as_str().unwrap_or_default().to_string();
    let major = version.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
    NodeInfo {
        exec_path: PathBuf::from(v["execPath"].as_str().unwrap_or_default()),
        version,
        abi: v["abi"].as_str().unwrap_or_default().to_string(),
        major,
        defines,
    }
}

fn include_dir(node: &NodeInfo) -> PathBuf {
    if let Ok(dir) = env::var("ISOLET_NODE_INCLUDE") {
        return PathBuf::from(dir);
    }
    let prefix = node.exec_path.parent().and_then(Path::parent).unwrap_or_else(|| Path::new("/"));
    prefix.join("include").join("node")
}

fn main() {
    napi_build::setup();
    for var in ["ISOLET_NODE", "ISOLET_NODE_INCLUDE", "ISOLET_NODE_PROBE", "npm_node_execpath"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=native/isolet_v8.cc");
    println!("cargo:rerun-if-changed=native/isolet_v8.h");

    let node = probe_node();
    if node.major < 20 {
        panic!("isolet build: Node {} is not supported; use Node 20 or newer", node.version);
    }
    let include = include_dir(&node);
    for header in ["v8.h", "node.h", "v8-platform.h"] {
        if !include.join(header).is_file() {
            panic!(
                "isolet build: {header} not found in {} (headers of Node {} at {}). Install the \
                 Node headers (they ship with the official Node tarballs) or set \
                 ISOLET_NODE_INCLUDE to the directory holding v8.h and node.h.",
                include.display(),
                node.version,
                node.exec_path.display()
            );
        }
    }

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("native/isolet_v8.cc")
        .include(&include)
        .include("native")
        // Node 24's headers need C++20; older ones build as C++17 like node-gyp does.
        .std(if node.major >= 24 { "c++20" } else { "c++17" })
        .flag_if_supported("-fno-rtti")
        .flag_if_supported("-fno-exceptions")
        .flag_if_supported("-fvisibility=hidden")
        .flag_if_supported("-Wno-unused-parameter")
        // Results of Set/Resolve that cannot fail in a fresh context are ignored on purpose.
        .flag_if_supported("-Wno-unused-result")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("_FILE_OFFSET_BITS", "64");
    for define in &node.defines {
        build.define(define, None);
    }
    build.compile("isolet_v8");

    println!("cargo:rustc-env=ISOLET_NODE_ABI={}", node.abi);
    println!("cargo:rustc-env=ISOLET_NODE_VERSION={}", node.version);
}
