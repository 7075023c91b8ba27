// Load-aware instance scraping for the agent: the collector, its records as the INSTANCES
// section, and an immediate publication when an instance's health flips (values ride the
// periodic publication).
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { InferenceCollector } from '../inference/collector';
import type { InstanceRecord } from '../snapshot/codec';
import type { InstanceLlmRecord } from '../snapshot/llm';

export interface InstanceSource {
  collector: InferenceCollector;
  records(): InstanceRecord[];
  /** LLM section records; undefined when no service publishes them (no section written) */
  llmRecords?: () => InstanceLlmRecord[] | undefined;
  stop(): Promise<void>;
}

/** undefined when the config has no inference services */
export async function startInstanceSource(
  inference: Record<string, unknown> | undefined,
  deps: { registry: Registry; logger: Logger; onHealthChange(): void },
): Promise<InstanceSource | undefined> {
  const services = (inference as { services?: unknown[] } | undefined)?.services;
  if (!services || services.length === 0) return undefined;
  const collector = new InferenceCollector(inference, { registry: deps.registry, logger: deps.logger });
  await collector.start();
  collector.on('health', () => deps.onHealthChange());
  return {
    collector,
    records: () => collector.snapshot(),
    llmRecords: collector.hasLlm() ? () => collector.llmRecords() : undefined,
    stop: () => collector.stop(),
  };
}
