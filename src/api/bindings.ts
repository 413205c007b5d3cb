// The generated bindings in use. On React Native they are the JSI bindings (set by
// src/index.tsx); the Node integration tests set the N-API flavour of the same generated API.
import type * as Generated from '../generated/local_llm_ffi';

/** The generated module's exports (types and functions of the Rust `local-llm-ffi` crate). */
export type Bindings = typeof Generated;

let current: Bindings | null = null;

/** Use `bindings` for every call of this package. */
export function setBindings(bindings: Bindings): void {
  current = bindings;
}

/** The bindings set with {@link setBindings}. */
export function getBindings(): Bindings {
  if (current === null) {
    throw new Error('react-native-local-llm-rs: the native module is not installed');
  }
  return current;
}

/** Release the native peer of a generated object now instead of at garbage collection. */
export function destroy(object: unknown): void {
  (object as { uniffiDestroy?: () => void }).uniffiDestroy?.();
}

/** Make `using x = ...` call `dispose()` where the runtime has `Symbol.dispose` (Node 20, not Hermes). */
export function addDisposeSymbol(cls: { prototype: { dispose(): void } }): void {
  const symbol = (Symbol as { dispose?: symbol }).dispose;
  if (symbol !== undefined) {
    Object.defineProperty(cls.prototype, symbol, {
      value(this: { dispose(): void }) {
        this.dispose();
      },
      configurable: true,
      writable: true,
    });
  }
}
