#!/usr/bin/env node
// CLI: switchyard agent.
//   tsx agent/src/main.ts [--config PATH] [--check] [--print-schema]
// Exit codes: 0 ok / clean shutdown, 1 runtime failure (e.g. port in use), 2 config or usage error.
import { ConfigError, effectiveSchema, loadConfig } from './config';
import { startAgent } from './agent';
import { ListenError } from './api/server';

const USAGE = `usage: switchyard-agent [--config PATH] [--check] [--print-schema]
  --config PATH    YAML config (default: $SWITCHYARD_CONFIG, else /etc/switchyard/agent.yaml if present, else built-in defaults)
  --check          validate the config, print the effective config as JSON, exit 0 (2 if invalid)
  --print-schema   print the effective JSON Schema and exit
env overrides: SWITCHYARD_CONFIG, SWITCHYARD_LISTEN_HOST, SWITCHYARD_LISTEN_PORT, SWITCHYARD_LOG_LEVEL, SWITCHYARD_PUBLISH_INTERVAL_MS
`;

function parseArgs(argv: string[]): { config?: string; check: boolean; printSchema: boolean } {
  const out = { config: undefined as string | undefined, check: false, printSchema: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--config' || a === '-c') {
      const v = argv[++i];
      if (v === undefined) usage('--config needs a path');
      out.config = v;
    } else if (a.startsWith('--config=')) out.config = a.slice('--config='.length);
    else if (a === '--check') out.check = true;
    else if (a === '--print-schema') out.printSchema = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    } else usage(`unknown argument ${a}`);
  }
  return out;
}

function usage(msg: string): never {
  process.stderr.write(`${msg}\n${USAGE}`);
  process.exit(2);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.printSchema) {
    process.stdout.write(JSON.stringify(effectiveSchema(), null, 2) + '\n');
    return;
  }
  let loaded;
  try {
    loaded = loadConfig({ path: args.config });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(err.message + '\n');
      process.exit(2);
    }
    throw err;
  }
  if (args.check) {
    process.stdout.write(JSON.stringify({ source: loaded.source ?? '(built-in defaults)', config: loaded.config }, null, 2) + '\n');
    return;
  }
  const agent = await startAgent(loaded.config);
  if (!loaded.source) agent.logger.warn('no config file: using built-in defaults (peer cloud-b -> http://127.0.0.1:9102/healthz)');
  else agent.logger.info({ source: loaded.source }, 'config loaded');
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (++signals > 1) {
      agent.logger.warn({ sig }, 'second signal: exiting now');
      process.exit(1);
    }
    agent.logger.info({ sig }, 'signal received: shutting down');
    agent.stop().then(
      () => process.exit(0),
      (err) => {
        agent.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

main().catch((err) => {
  // an operator's problem (port taken, address not on this host) is one line; a bug keeps its stack
  process.stderr.write(`switchyard-agent: ${err instanceof ListenError ? err.message : ((err as Error).stack ?? err)}\n`);
  process.exit(1);
});
