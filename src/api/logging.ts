import { getBindings } from './bindings';
import type { LogCallback, LogLevel } from './types';

let callback: LogCallback | null = null;
let pumping = false;

function levelName(level: unknown): LogLevel {
  const { LogLevel: L } = getBindings();
  switch (level) {
    case L.Debug:
      return 'debug';
    case L.Info:
      return 'info';
    case L.Error:
      return 'error';
    default:
      return 'warn';
  }
}

function nativeLevel(level: LogLevel) {
  const { LogLevel: L } = getBindings();
  return { debug: L.Debug, info: L.Info, warn: L.Warn, error: L.Error }[level] ?? L.Info;
}

// Logs are pulled: native code queues records and this loop awaits them, so Rust never calls
// into JavaScript from an engine thread. If the native queue fails, the loop ends and reports
// it through the callback (never as an unhandled rejection); setting a callback again restarts it.
async function pump(): Promise<void> {
  pumping = true;
  try {
    const { nextLogRecords } = getBindings();
    while (callback !== null) {
      let records: Awaited<ReturnType<typeof nextLogRecords>>;
      try {
        records = await nextLogRecords();
      } catch (e) {
        try {
          callback?.('error', `log delivery stopped: ${e instanceof Error ? e.message : String(e)}`);
        } catch {
          // A throwing callback must not escape either.
        }
        return;
      }
      for (const r of records) {
        try {
          callback?.(levelName(r.level), r.message);
        } catch {
          // A throwing callback must not stop log delivery.
        }
      }
    }
  } finally {
    pumping = false;
  }
}

/** Send engine logs at `minLevel` and above to `cb`; `null` restores the default (stderr / logcat). */
export function setLogCallback(cb: LogCallback | null, minLevel: LogLevel = 'info'): void {
  const b = getBindings();
  callback = cb;
  if (cb !== null) {
    b.setLogLevel(nativeLevel(minLevel));
    b.setLogCapture(true);
    if (!pumping) {
      // The pump reports its own failures (it never rejects).
      pump().catch(() => undefined);
    }
  } else {
    b.setLogCapture(false);
  }
}

/** Set the least severe level the engine emits (default 'warn'). */
export function setLogLevel(level: LogLevel): void {
  getBindings().setLogLevel(nativeLevel(level));
}
