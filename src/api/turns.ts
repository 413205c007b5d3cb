/**
 * The order in which a context's generations reach the native scheduler: the order their calls
 * were made. A call takes a turn when it is made; just before its native call it waits for the
 * turns taken before it, and it lets the next one go once the native call has queued its request
 * (that happens synchronously, in the native future's first poll) or once it gives up. Without
 * this, calls that prepare asynchronously first (chat completions fit their messages, which
 * tokenizes on a worker thread) would reach the scheduler in the order those preparations end.
 */
export class Turns {
  /** Settles when the last turn taken lets the next one go. */
  private last: Promise<void> = Promise.resolve();

  /** A new turn, after every turn taken before it. */
  take(): Turn {
    let pass: () => void = () => {};
    const passed = new Promise<void>((resolve) => {
      pass = resolve;
    });
    const turn = new Turn(this.last, pass);
    this.last = passed;
    return turn;
  }
}

/** One call's place in its context's {@link Turns}. */
export class Turn {
  /** @param ready settles when every earlier turn has let this one go. */
  constructor(
    readonly ready: Promise<void>,
    private readonly pass: () => void,
  ) {}

  /** Let the next turn go (again: no effect). */
  done(): void {
    this.pass();
  }
}
