// agent/config.schema.json is what editors, docs and the packaging tests read; the loader composes
// the same schema at run time. They must be identical (regenerate: npm run schema).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { effectiveSchema } from '../../agent/src/config';

test('agent/config.schema.json is the effective schema, inference section included', () => {
  const file: any = JSON.parse(fs.readFileSync(path.join(__dirname, '../../agent/config.schema.json'), 'utf8'));
  const inference = file.properties.inference;
  assert.deepEqual(file, effectiveSchema(), 'agent/config.schema.json is stale: run npm run schema');
  assert.ok(inference.properties?.services, 'the inference sub-schema is in the file');
});
