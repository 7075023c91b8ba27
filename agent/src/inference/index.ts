// Load-aware instance scraping: public API.
export { InferenceCollector, type CollectorOptions, type InstanceDetail, type Logger } from './collector';
export { Discovery, type DnsResolver, type DiscoveryChange, type DiscoverySpec, formatAddr, parseAddr, systemResolver } from './discovery';
export { encodeInstancesSection, decodeInstancesSection, instancesSectionSize, reasonCode, INSTANCE_FIXED_BYTES, type InstanceRecord, type InstanceReason } from './encode';
export { BaselineTracker, InstanceEstimator, healthScore, histQuantile, secondMomentFromBuckets, trimmedMedian, type EstimatorOptions, type EstimatorState } from './estimator';
export { ExpositionParseError, ExpositionParser, parseExposition, histogramSeries, type Exposition, type Sample } from './exposition';
export { BUILTIN_MAPPINGS, extractSignals, hasLoadSignal, resolveMappings, type MetricMappings, type ServerKind, type Signals } from './mappings';
export { inferenceSchema, resolveInferenceConfig, checkInferenceConfig, InferenceConfigError, type InferenceConfig, type InferenceServiceConfig } from './schema';
export { scrapeOnce, type ScrapeOutcome } from './scraper';
