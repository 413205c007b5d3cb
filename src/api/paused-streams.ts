/**
 * Which of a context's streams a new request cancels. A stream holds its context (a scheduled
 * stream: one of its sequences) only while it is read; while its consumer has not asked for the
 * next piece it is "paused", and a request made on the context meanwhile would wait for it
 * forever if the consumer never comes back. So a new request cancels the paused streams it
 * would wait for: a request that runs alone waits for all of them; a scheduled one (on a context
 * with several sequences) waits only for a free sequence, so it cancels the paused streams that
 * run alone and, when paused scheduled streams hold every sequence, the oldest one.
 */
export class PausedStreams {
  /** Cancel functions of the paused streams (oldest first), each with whether it is scheduled. */
  private readonly paused = new Map<() => void, boolean>();

  /** A stream pauses at a piece: `cancel` stops it; `scheduled` says whether it shares sequences. */
  pause(cancel: () => void, scheduled: boolean): void {
    this.paused.set(cancel, scheduled);
  }

  /** The stream paused with `cancel` is read again (or ended). */
  resume(cancel: () => void): void {
    this.paused.delete(cancel);
  }

  /** How many streams are paused. */
  get size(): number {
    return this.paused.size;
  }

  /** Before a request that runs alone: cancel every paused stream. */
  preemptAll(): void {
    for (const cancel of this.paused.keys()) {
      cancel();
    }
    this.paused.clear();
  }

  /**
   * Before a request: cancel the paused streams it would wait for (every one when it runs alone;
   * when it is `scheduled` on a context of `sequences` sequences, those that run alone and, while
   * paused scheduled streams hold every sequence, the oldest of them).
   */
  preemptFor(scheduled: boolean, sequences: number): void {
    if (!scheduled) {
      this.preemptAll();
      return;
    }
    let held = 0;
    for (const [cancel, isScheduled] of this.paused) {
      if (isScheduled) {
        held += 1;
      } else {
        cancel();
        this.paused.delete(cancel);
      }
    }
    for (const cancel of this.paused.keys()) {
      if (held < sequences) {
        break;
      }
      cancel();
      this.paused.delete(cancel);
      held -= 1;
    }
  }
}
