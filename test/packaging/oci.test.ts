// scripts/oci/build-oci.ts: the OCI image layout follows the image-layout spec,
// is content-addressed and reproducible, and the image is the Wasm "compat"
// variant Istio's fetcher reads (one tar+gzip layer holding plugin.wasm).
// Also: the WasmPlugin pin in istio/base is reproducible from its plugin.wasm.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { extract } from 'tar-stream';
import { MEDIA_TYPES, PLUGIN_FILE, WASM_SHA_ANNOTATION, buildOciImage, pinWasmPlugin } from '../../scripts/oci/build-oci';
import { type Obj, p, readYaml } from './helpers';

const sha = (b: Buffer): string => 'sha256:' + createHash('sha256').update(b).digest('hex');

async function tinyWasm(): Promise<Buffer> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const wabt = await require('wabt')();
  const mod = wabt.parseWat(
    'tiny.wat',
    '(module (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "_initialize")))',
  );
  const bin = Buffer.from(mod.toBinary({}).buffer);
  mod.destroy();
  assert.ok(WebAssembly.validate(bin));
  return bin;
}

async function untar(buf: Buffer): Promise<{ name: string; type: string; data: Buffer; mtime: number; uid: number; gid: number; mode: number }[]> {
  const out: { name: string; type: string; data: Buffer; mtime: number; uid: number; gid: number; mode: number }[] = [];
  await new Promise<void>((resolveP, reject) => {
    const ex = extract();
    ex.on('entry', (h, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => {
        chunks.push(c as Buffer);
      });
      stream.on('end', () => {
        out.push({ name: h.name, type: h.type ?? 'file', data: Buffer.concat(chunks), mtime: h.mtime?.getTime() ?? -1, uid: h.uid ?? -1, gid: h.gid ?? -1, mode: h.mode ?? -1 });
        next();
      });
      stream.resume();
    });
    ex.on('finish', () => resolveP());
    ex.on('error', reject);
    ex.end(buf);
  });
  return out;
}

const tmp = (): string => mkdtempSync(join(tmpdir(), 'switchyard-oci-'));

/** Validate an OCI image layout directory per the image-layout spec; returns the parsed manifest. */
function checkLayout(dir: string): { manifest: Obj; manifestDigest: string; blobs: Map<string, Buffer> } {
  assert.deepEqual(JSON.parse(readFileSync(join(dir, 'oci-layout'), 'utf8')), { imageLayoutVersion: '1.0.0' });
  const blobs = new Map<string, Buffer>();
  const blobDir = join(dir, 'blobs', 'sha256');
  for (const f of readdirSync(blobDir)) {
    assert.match(f, /^[a-f0-9]{64}$/, `blob file name ${f}`);
    const b = readFileSync(join(blobDir, f));
    assert.equal(sha(b), `sha256:${f}`, `blob ${f} is content-addressed`);
    blobs.set(`sha256:${f}`, b);
  }
  assert.deepEqual(readdirSync(join(dir, 'blobs')), ['sha256'], 'only sha256 blobs');
  const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8'));
  assert.equal(index.schemaVersion, 2);
  assert.equal(index.mediaType, MEDIA_TYPES.index);
  assert.equal(index.manifests.length, 1);
  const desc = index.manifests[0];
  const used = new Set<string>();
  const blob = (d: Obj, mediaType: string): Buffer => {
    assert.equal(d.mediaType, mediaType);
    const b = blobs.get(d.digest);
    assert.ok(b, `descriptor ${d.digest} has a blob`);
    assert.equal(b.length, d.size, `size of ${d.digest}`);
    used.add(d.digest);
    return b;
  };
  const manifest = JSON.parse(blob(desc, MEDIA_TYPES.manifest).toString('utf8'));
  assert.ok(desc.annotations['org.opencontainers.image.ref.name']);
  assert.equal(manifest.schemaVersion, 2);
  assert.equal(manifest.mediaType, MEDIA_TYPES.manifest);
  const config = JSON.parse(blob(manifest.config, MEDIA_TYPES.config).toString('utf8'));
  assert.ok(config.architecture && config.os, 'config has architecture and os');
  assert.equal(config.rootfs.type, 'layers');
  assert.equal(manifest.layers.length, 1, 'compat variant: one layer');
  const layer = blob(manifest.layers[0], MEDIA_TYPES.layer);
  assert.deepEqual(config.rootfs.diff_ids, [sha(gunzipSync(layer))], 'diff_id = digest of the uncompressed layer');
  assert.deepEqual([...blobs.keys()].sort(), [...used].sort(), 'no unreferenced blobs');
  return { manifest, manifestDigest: desc.digest, blobs };
}

test('layout is spec-conformant and the layer is a gzip tar holding exactly plugin.wasm', async () => {
  const wasm = await tinyWasm();
  const out = tmp();
  try {
    const r = buildOciImage(wasm, { outDir: out, tag: '9.9.9' });
    const { manifest, manifestDigest, blobs } = checkLayout(r.layoutDir);
    assert.equal(manifestDigest, r.manifestDigest);
    assert.equal(manifest.layers[0].digest, r.layerDigest);
    const layer = blobs.get(r.layerDigest)!;
    assert.deepEqual([...layer.subarray(0, 2)], [0x1f, 0x8b], 'gzip magic');
    const entries = await untar(gunzipSync(layer));
    assert.deepEqual(entries.map((e) => e.name), [PLUGIN_FILE]);
    assert.equal(entries[0].type, 'file');
    assert.ok(entries[0].data.equals(wasm), 'plugin.wasm is the input, byte for byte');
    assert.equal(entries[0].mtime, 0);
    assert.equal(entries[0].uid, 0);
    assert.equal(entries[0].gid, 0);
    assert.equal(entries[0].mode, 0o644);
    assert.equal(r.wasmSha256, sha(wasm));
    // digests.json agrees with the layout.
    const d = JSON.parse(readFileSync(join(out, 'digests.json'), 'utf8'));
    assert.equal(d.manifestDigest, r.manifestDigest);
    assert.equal(d.wasmPluginSha256, r.manifestDigest.slice(7));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('the tarball is the same layout (an oci-archive) with fixed metadata', async () => {
  const wasm = await tinyWasm();
  const out = tmp();
  try {
    const r = buildOciImage(wasm, { outDir: out });
    const entries = await untar(readFileSync(r.archivePath));
    const files = entries.filter((e) => e.type === 'file');
    const fromDir = (rel: string): Buffer => readFileSync(join(r.layoutDir, rel));
    assert.deepEqual(files.map((e) => e.name).sort(), ['index.json', 'oci-layout', ...[...r.blobs.keys()].map((d) => `blobs/sha256/${d.slice(7)}`)].sort());
    for (const e of files) assert.ok(e.data.equals(fromDir(e.name)), `${e.name} matches the layout dir`);
    for (const e of entries) assert.equal(e.mtime, 0, `${e.name} mtime`);
    // The archive's layout also passes the layout checks when unpacked.
    const unpacked = tmp();
    try {
      const { mkdirSync, writeFileSync } = await import('node:fs');
      for (const e of entries) {
        if (e.type === 'directory') mkdirSync(join(unpacked, e.name), { recursive: true });
        else writeFileSync(join(unpacked, e.name), e.data);
      }
      checkLayout(unpacked);
    } finally {
      rmSync(unpacked, { recursive: true, force: true });
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('builds are reproducible: same input, same digests and bytes', async () => {
  const wasm = await tinyWasm();
  const a = tmp();
  const b = tmp();
  try {
    const ra = buildOciImage(wasm, { outDir: a, tag: '1.0.0' });
    const rb = buildOciImage(wasm, { outDir: b, tag: '1.0.0' });
    assert.equal(ra.manifestDigest, rb.manifestDigest);
    assert.equal(ra.layerDigest, rb.layerDigest);
    assert.ok(readFileSync(ra.archivePath).equals(readFileSync(rb.archivePath)));
    // A different tag changes only the manifest/index annotations, not the layer.
    const c = tmp();
    try {
      const rc = buildOciImage(wasm, { outDir: c, tag: '1.0.1' });
      assert.equal(rc.layerDigest, ra.layerDigest);
      assert.notEqual(rc.manifestDigest, ra.manifestDigest);
    } finally {
      rmSync(c, { recursive: true, force: true });
    }
  } finally {
    rmSync(a, { recursive: true, force: true });
    rmSync(b, { recursive: true, force: true });
  }
});

test('rejects input that is not WebAssembly', () => {
  const out = tmp();
  try {
    assert.throws(() => buildOciImage(Buffer.from('not wasm at all'), { outDir: out }), /not a WebAssembly binary/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('--pin rewrites sha256, the url tag and the wasm annotation, keeping comments', async () => {
  const wasm = await tinyWasm();
  const out = tmp();
  try {
    const r = buildOciImage(wasm, { outDir: out, tag: '2.3.4' });
    const { copyFileSync } = await import('node:fs');
    const f = join(out, 'wasmplugin.yaml');
    copyFileSync(p('istio/base/wasmplugin.yaml'), f);
    pinWasmPlugin(f, r.manifestDigest, r.tag, r.wasmSha256);
    const text = readFileSync(f, 'utf8');
    assert.match(text, /# FAIL_CLOSE \(explicit/, 'comments survive');
    const YAML = (await import('yaml')).default;
    const wp = YAML.parse(text);
    assert.equal(wp.spec.sha256, r.manifestDigest.slice(7));
    assert.match(wp.spec.url, /:2\.3\.4$/);
    assert.equal(wp.metadata.annotations[WASM_SHA_ANNOTATION], r.wasmSha256.slice(7));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('istio/base WasmPlugin pin is reproducible from the plugin.wasm it names', (t) => {
  const wp = readYaml('istio/base/wasmplugin.yaml');
  const pinnedWasm = wp.metadata.annotations[WASM_SHA_ANNOTATION];
  const tag = /:([^:/]+)$/.exec(wp.spec.url)![1];
  const built = p('build/switchyard.wasm');
  assert.ok(existsSync(built) && statSync(built).isFile(), 'build/switchyard.wasm missing: run npm run build first');
  const wasm = readFileSync(built);
  // The manifests must pin the module this tree builds: a filter change without a re-pin fails here.
  assert.equal(sha(wasm).slice(7), pinnedWasm,
    `build/switchyard.wasm (${sha(wasm)}) is not the pinned module (sha256:${pinnedWasm}); ` +
      'run: npm run pin');
  const out = tmp();
  try {
    const r = buildOciImage(wasm, { outDir: out, tag });
    assert.equal(r.manifestDigest.slice(7), wp.spec.sha256, 'spec.sha256 = manifest digest of the image built from the pinned plugin.wasm');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('--pin-ecds: the ECDS-delivered filter (istio/options/inference) gets the same digest and tag, comments kept', async () => {
  const { pinEcdsWasm } = await import('../../scripts/oci/build-oci');
  const { mkdtempSync, readFileSync: rf, writeFileSync: wf } = await import('node:fs');
  const os = await import('node:os');
  const pathm = await import('node:path');
  const YAMLm = (await import('yaml')).default;
  const dir = mkdtempSync(pathm.join(os.tmpdir(), 'pin-ecds-'));
  const f = pathm.join(dir, 'ef.yaml');
  const src = rf(pathm.resolve(__dirname, '../../istio/options/inference/envoyfilter-wasm.yaml'), 'utf8');
  wf(f, src);
  pinEcdsWasm(f, 'sha256:' + 'ab'.repeat(32), '9.9.9');
  const out = rf(f, 'utf8');
  const doc = YAMLm.parse(out);
  const remote = doc.spec.configPatches.find((p: any) => p.applyTo === 'EXTENSION_CONFIG').patch.value.typed_config.config.vm_config.code.remote;
  assert.equal(remote.sha256, 'ab'.repeat(32));
  assert.match(remote.http_uri.uri, /^oci:\/\/registry\.cloud-a\.switchyard\.invalid\/switchyard\/filter:9\.9\.9$/);
  assert.ok(out.includes('# the one field the WasmPlugin cannot set'), 'comments kept');
});
