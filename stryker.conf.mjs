// Stryker (TypeScript mutation testing) for the agent's link, inference and snapshot modules.
// A BENCHMARK, never part of `npm test` or CI: run it through bench/mutation.ts, which picks the
// unit (STRYKER_UNIT) and a seeded sample of lines (--mutate), then prints the score per module.
// node:test has no Stryker plugin, so the `command` runner runs the unit's own test files; each
// unit is mapped to the files that cover it so one run stays in minutes.
import { MUTATION_UNITS } from './scripts/mutation/groups.mjs';

const name = process.env.STRYKER_UNIT ?? 'link-schmitt';
const unit = MUTATION_UNITS[name];
if (!unit) throw new Error(`STRYKER_UNIT: unknown unit '${name}' (${Object.keys(MUTATION_UNITS).join(', ')})`);

export default {
  testRunner: 'command',
  commandRunner: { command: `node --import tsx --test --test-concurrency=1 ${unit.tests.join(' ')}` },
  // The command runner cannot map tests to mutants: every mutant runs the group's whole command.
  coverageAnalysis: 'off',
  mutate: unit.mutate,
  // Log and error-message text is not behaviour the tests pin; mutating every string literal
  // doubles the run time for mutants that mostly only change a message.
  mutator: { excludedMutations: ['StringLiteral'] },
  concurrency: Number(process.env.STRYKER_CONCURRENCY ?? 1),
  timeoutMS: 5000,
  reporters: ['json', 'progress'],
  jsonReporter: { fileName: `reports/mutation/ts-${name}.json` },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  ignorePatterns: ['build', 'reports', '.rig', '.stryker-tmp'],
  disableTypeChecks: 'agent/src/**/*.ts',
};
