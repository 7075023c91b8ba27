// Units of the TypeScript mutation benchmark: each names the modules it mutates and the test files
// that cover them (kept small: every mutant of a unit runs these files only, so one unit of a
// sampled run takes minutes). Shared by stryker.conf.mjs and bench/mutation.ts.
export const MUTATION_UNITS = {
  'link-schmitt': {
    group: 'link',
    mutate: ['agent/src/link/schmitt.ts'],
    tests: ['test/agent/schmitt.test.ts'],
  },
  'link-probe': {
    group: 'link',
    mutate: ['agent/src/link/peer-monitor.ts', 'agent/src/link/probe.ts', 'agent/src/link/starvation.ts'],
    tests: ['test/agent/probe.test.ts', 'test/agent/prober.test.ts', 'test/agent/peer-monitor-edges.test.ts'],
  },
  'inference-estimator': {
    group: 'inference',
    mutate: ['agent/src/inference/estimator.ts'],
    tests: ['test/inference/estimator.test.ts', 'test/inference/estimator-edges.test.ts'],
  },
  'inference-exposition': {
    group: 'inference',
    mutate: ['agent/src/inference/exposition.ts', 'agent/src/inference/mappings.ts'],
    tests: ['test/inference/exposition.test.ts', 'test/inference/mappings.test.ts'],
  },
  'inference-discovery': {
    group: 'inference',
    mutate: ['agent/src/inference/discovery.ts'],
    tests: ['test/inference/discovery.test.ts'],
  },
  'inference-collector': {
    group: 'inference',
    mutate: ['agent/src/inference/collector.ts', 'agent/src/inference/encode.ts'],
    tests: ['test/inference/collector.test.ts', 'test/inference/slots.test.ts', 'test/inference/collector-records.test.ts'],
  },
  'inference-schema': {
    group: 'inference',
    mutate: ['agent/src/inference/schema.ts'],
    tests: ['test/inference/schema.test.ts', 'test/inference/llm.test.ts'],
  },
  'inference-scraper': {
    group: 'inference',
    mutate: ['agent/src/inference/scraper.ts'],
    tests: ['test/inference/scrape-stream.test.ts', 'test/inference/scraper.test.ts'],
  },
  'inference-llm': {
    group: 'inference',
    mutate: ['agent/src/inference/llm.ts'],
    tests: ['test/inference/llm.test.ts', 'test/inference/llm-edges.test.ts'],
  },
  'snapshot-codec': {
    group: 'snapshot',
    mutate: ['agent/src/snapshot/codec.ts', 'agent/src/snapshot/llm.ts', 'agent/src/snapshot/rules.ts', 'agent/src/snapshot/rules-section.ts'],
    tests: ['test/agent/codec.test.ts', 'test/agent/snapshot-fixtures.test.ts', 'test/agent/snapshot-llm.test.ts', 'test/agent/codec-bounds.test.ts'],
  },
  'snapshot-publisher': {
    group: 'snapshot',
    mutate: ['agent/src/snapshot/publisher.ts'],
    tests: ['test/agent/publisher.test.ts', 'test/agent/codec.test.ts', 'test/agent/http-api.test.ts'],
  },
};
