// as-pect (AssemblyScript unit tests) for the filter's pure logic: filter/assembly/lib/*.
export default {
  entries: ["filter/__tests__/**/*.spec.ts"],
  include: ["filter/__tests__/**/*.include.ts"],
  disclude: [/node_modules/],
  async instantiate(memory, createImports, instantiate, binary) {
    return instantiate(binary, createImports({ env: { memory } }));
  },
  outputBinary: false,
};
