// as-pect (AssemblyScript unit tests) for the filter's pure logic: filter/assembly/lib/*.
import { readFileSync } from "node:fs";

// The golden snapshot fixtures (test/fixtures/snapshot/, see its generate.ts), handed to the specs
// through the "fixtures" imports so the filter decodes the very files the agent's suite decodes.
const FIXTURE_DIR = "test/fixtures/snapshot";
const manifest = JSON.parse(readFileSync(`${FIXTURE_DIR}/manifest.json`, "utf8")).fixtures;
const utf8 = new TextEncoder();

function fixtureImports(memoryOf) {
  const bytesOf = (i) => readFileSync(`${FIXTURE_DIR}/${manifest[i].file}`);
  const textOf = (kind, i) => utf8.encode(kind === 0 ? manifest[i].file : kind === 1 ? manifest[i].expect : manifest[i].error ?? "");
  const copy = (src, dst) => new Uint8Array(memoryOf().buffer, dst, src.length).set(src);
  return {
    count: () => manifest.length,
    size: (i) => bytesOf(i).length,
    read: (i, dst) => copy(bytesOf(i), dst),
    textLength: (kind, i) => textOf(kind, i).length,
    text: (kind, i, dst) => copy(textOf(kind, i), dst),
  };
}

export default {
  entries: ["filter/__tests__/**/*.spec.ts"],
  include: ["filter/__tests__/**/*.include.ts"],
  disclude: [/node_modules/],
  async instantiate(memory, createImports, instantiate, binary) {
    // the test modules export their own memory (as-pect.asconfig.json exportMemory)
    let result;
    const memoryOf = () => result?.exports?.memory ?? result?.instance?.exports?.memory ?? memory;
    result = await instantiate(binary, createImports({ env: { memory }, fixtures: fixtureImports(memoryOf) }));
    return result;
  },
  outputBinary: false,
};
