// Programmatic API of the Switchyard agent.
export { spawnAgent, type SpawnedAgent, type SpawnAgentOptions } from './spawn';
export { startAgent, MAX_WAIT_MS, type AgentHandle, type AgentEvents, type StartOptions } from './agent';
export { ListenError, type ApiRoute } from './api/server';
export {
  loadConfig,
  resolveConfig,
  effectiveSchema,
  ConfigError,
  BUILTIN_DEFAULTS,
  DEFAULT_CONFIG_PATH,
  ENV_OVERRIDES,
  type AgentConfig,
  type AgentConfigInput,
  type PeerConfig,
  type ProbeSpec,
} from './config';
export * from './snapshot/codec';
export { SnapshotPublisher, type Published, type PublishReason } from './snapshot/publisher';
export * as schmitt from './link/schmitt';
export { PeerMonitor, type SampleEvent, type StateEvent, type SampleKind } from './link/peer-monitor';
