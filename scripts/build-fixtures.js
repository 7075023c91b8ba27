// Compiles the extra Wasm modules used by tests and benchmarks (not shipped):
// benchmark baselines (no-op filter, the seed's uncached design) and SDK probes.
const { execFileSync } = require("node:child_process");
const path = require("node:path");
const fs = require("node:fs");

const root = path.resolve(__dirname, "..");
const asc = path.join(root, "node_modules", ".bin", "asc");
// An explicit config: without it asc also reads ./asconfig.json and compiles the filter's entry
// into every fixture.
const common = ["--config", "scripts/asconfig.fixtures.json"];
const modules = [
  ["bench/filters/noop.ts", "build/bench-noop.wasm"],
  ["bench/filters/uncached.ts", "build/bench-uncached.wasm"],
];
const probes = path.join(root, "test", "fixtures", "probes");
if (fs.existsSync(probes)) {
  for (const f of fs.readdirSync(probes).filter((f) => f.endsWith(".ts")).sort()) {
    modules.push([`test/fixtures/probes/${f}`, `build/probe-${f.replace(/\.ts$/, "")}.wasm`]);
  }
}
for (const [src, out] of modules) {
  execFileSync(asc, [src, "-o", out, ...common], { cwd: root, stdio: "inherit" });
}
console.log(`built ${modules.length} fixture modules`);
