// Jest setup of the UI tests. React Native's AbortController (the abort-controller polyfill)
// aborts with an ordinary Error named AbortError. Node's aborts with a DOMException made in
// Node's own realm, which inside Jest's sandbox is not `instanceof Error` (the example app's
// `isAbort` checks that): abort with an Error of the sandbox's realm instead, as on a phone.
class SandboxAbortController extends AbortController {
  abort(reason?: unknown): void {
    if (reason === undefined) {
      const error = new Error('This operation was aborted');
      error.name = 'AbortError';
      super.abort(error);
    } else {
      super.abort(reason);
    }
  }
}

globalThis.AbortController = SandboxAbortController;
