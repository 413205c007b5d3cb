import { getBindings } from './bindings';
import { num, toBackendDevice, toMemoryEstimate } from './convert';
import { LocalLLMErrorCode, wrapAsync } from './errors';
import { Model, localPath } from './model';
import {
  BYTES_RULE,
  CACHE_TYPE_OPTIONS,
  ESTIMATE_OPTION_RULES,
  checkNumber,
  checkOptions,
  checkTextOptions,
  invalidOption,
} from './options';
import type { BackendDevice, KvCacheTypes, MemoryEstimate } from './types';

/**
 * The device's capabilities, in local-llm-rn's shape. Memory comes from the OS (Linux and
 * Android: `/proc/meminfo`; iOS: `hw.memsize` and `os_proc_available_memory`, the app's own
 * limit); the OS versions come from React Native's `Platform`.
 */
export interface DeviceCapabilities {
  /** Total physical RAM in bytes (0 where the OS does not report it: Windows). */
  totalRAM: number;
  /**
   * RAM this app can still allocate, in bytes: on iOS its jetsam limit, elsewhere the system's
   * available memory (0 where the OS does not report it: macOS and Windows).
   */
  availableRAM: number;
  /**
   * The device this engine computes on. It does not use the GPU: this is an accelerator's
   * description where one is in the registry (IBM Z NNPA), else the CPU's, e.g.
   * `"Apple A16 (aarch64)"` or `"Intel(R) Xeon(R) ... (x86_64)"`.
   */
  gpuName: string;
  /** Apple GPU family: always absent, the engine does not use Metal. */
  metalFamily?: number;
  /** Metal version: always absent, the engine does not use Metal. */
  metalVersion?: number;
  /** iOS version, e.g. `"17.2"` (React Native's `Platform.Version`). iOS only. */
  iosVersion?: string;
  /** Vulkan version: always absent, the engine does not use Vulkan. */
  vulkanVersion?: string;
  /** SoC model: absent, React Native does not expose `Build.SOC_MODEL`. */
  chipset?: string;
  /** Android version, e.g. `"14"` (React Native's `Platform.constants.Release`). Android only. */
  androidVersion?: string;
  /** Low-power mode: `false`, React Native does not expose it. */
  isLowPowerMode: boolean;
  /** Addition: the engine's compute devices. */
  backends: BackendDevice[];
}

/** The OS and its version, as the host runtime reports them (see {@link setPlatform}). */
export interface PlatformInfo {
  /** `ios`, `android`, or another runtime's name. */
  os: string;
  /** The OS version as a string. */
  version: string;
}

let platform: PlatformInfo | null = null;

/** Record the OS (src/index.tsx passes React Native's `Platform`; Node sets nothing). */
export function setPlatform(info: PlatformInfo): void {
  platform = info;
}

/** The engine's backend registry: the CPU, and accelerators such as IBM Z NNPA with their features. */
export function getBackends(): BackendDevice[] {
  return getBindings().getBackends().map(toBackendDevice);
}

/** The number of threads the engine uses by default. */
export function optimalThreadCount(): number {
  return getBindings().optimalThreadCount();
}

/** The device's RAM, compute devices and OS version. */
export function getDeviceCapabilities(): DeviceCapabilities {
  const mem = getBindings().deviceMemory();
  const backends = getBackends();
  const compute = backends.find((b) => b.kind !== 'cpu') ?? backends[0];
  return {
    totalRAM: mem.totalBytes === undefined ? 0 : num(mem.totalBytes),
    availableRAM: mem.availableBytes === undefined ? 0 : num(mem.availableBytes),
    gpuName: compute?.description ?? 'CPU',
    ...(platform?.os === 'ios' ? { iosVersion: platform.version } : {}),
    ...(platform?.os === 'android' ? { androidVersion: platform.version } : {}),
    isLowPowerMode: false,
    backends,
  };
}

/** The answer of {@link canRunModel}. */
export interface CanRunResult {
  canRun: boolean;
  reason?: string;
  suggestion?: string;
  /** Addition: what the model needs (absent when only a byte count was given). */
  estimate?: MemoryEstimate;
  /** Addition: false when the available RAM is unknown (then `canRun` is true, unverified). */
  memoryKnown: boolean;
}

/**
 * Judged as context creation does: the plan may take the engine's usable share of the available
 * memory (`deviceMemory().usableBytes`, 80%), the rest is headroom for the system and other apps.
 */
function judge(neededBytes: number, estimate?: MemoryEstimate): CanRunResult {
  const mem = getBindings().deviceMemory();
  const available = mem.availableBytes === undefined ? null : num(mem.availableBytes);
  const usable = mem.usableBytes === undefined ? null : num(mem.usableBytes);
  if (available === null || usable === null) {
    return {
      canRun: true,
      memoryKnown: false,
      estimate,
      reason: 'available memory is unknown on this platform',
    };
  }
  const mb = (b: number) => Math.round(b / (1024 * 1024));
  if (neededBytes > usable) {
    return {
      canRun: false,
      memoryKnown: true,
      estimate,
      reason: `Model needs ~${mb(neededBytes)} MB but only ${mb(available)} MB available`,
      suggestion:
        neededBytes > 2 * 1024 ** 3
          ? 'Try a Q4_K_M quantized variant, a smaller model or a smaller context'
          : 'Use a smaller context or close other apps to free memory',
    };
  }
  return { canRun: true, memoryKnown: true, estimate };
}

/**
 * Whether the device has the memory for a model: for a loaded {@link Model}, its weights plus
 * the KV cache of `contextSize` tokens (from the model's metadata); for a number (local-llm-rn's
 * `modelSizeBytes`), that many bytes of weights (the KV cache is then not counted). A size that
 * is not a finite number >= 0 (NaN, -1, a BigInt) and an argument that is neither a Model nor
 * a number throw INVALID_OPTION.
 */
export function canRunModel(
  model: Model | number,
  options: { contextSize?: number } & KvCacheTypes = {},
): CanRunResult {
  checkOptions(options, ESTIMATE_OPTION_RULES);
  if (typeof model === 'number' || typeof model === 'bigint') {
    return judge(checkNumber('modelSizeBytes', model, BYTES_RULE));
  }
  if (!(model instanceof Model)) {
    throw invalidOption('model', model, 'a Model or a size in bytes');
  }
  const estimate = model.estimateMemory(options.contextSize ?? 0, options);
  return judge(estimate.totalBytes, estimate);
}

/** Addition: {@link canRunModel} for a GGUF file that is not loaded (reads its metadata only). */
export async function canRunModelFile(
  path: string,
  options: { contextSize?: number } & KvCacheTypes = {},
): Promise<CanRunResult> {
  const { estimateModelMemory } = getBindings();
  const file = localPath(path);
  checkOptions(options, ESTIMATE_OPTION_RULES);
  checkTextOptions(options, CACHE_TYPE_OPTIONS);
  const estimate = toMemoryEstimate(
    await wrapAsync(LocalLLMErrorCode.MODEL_LOAD_FAILED, () =>
      estimateModelMemory(file, options.contextSize ?? 0, options.kvCacheTypeK, options.kvCacheTypeV),
    ),
  );
  return judge(estimate.totalBytes, estimate);
}

/**
 * A quantization for the device's total RAM (8+ GB: Q8_0, 6+: Q6_K, 4+: Q4_K_M, less or
 * unknown: Q3_K_S), local-llm-rn's table.
 */
export function recommendQuantization(): string {
  const total = getBindings().deviceMemory().totalBytes;
  const gb = (total === undefined ? 0 : num(total)) / 1024 ** 3;
  if (gb >= 8) return 'Q8_0';
  if (gb >= 6) return 'Q6_K';
  if (gb >= 4) return 'Q4_K_M';
  return 'Q3_K_S';
}
