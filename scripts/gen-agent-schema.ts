// Writes the agent's effective JSON Schema (config.schema.json with the inference sub-schema from
// agent/src/inference/schema.ts substituted) back to agent/config.schema.json, so that editors and
// docs see the whole schema. test/agent/schema-file.test.ts fails if the file is out of date.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { effectiveSchema } from '../agent/src/config';

const file = path.join(__dirname, '../agent/config.schema.json');
fs.writeFileSync(file, JSON.stringify(effectiveSchema(), null, 2) + '\n');
console.log(`wrote ${path.relative(process.cwd(), file)}`);
