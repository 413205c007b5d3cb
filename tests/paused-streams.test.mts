// Which paused streams a new request cancels (src/api/paused-streams.ts), without the engine:
// every rule of the arbitration on cancel functions that record their calls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PausedStreams } from '../src/api/paused-streams.ts';

/** `names` paused in order; returns the arbiter and the cancel log. */
function pausedStreams(...names: string[]): { streams: PausedStreams; cancelled: string[] } {
  const streams = new PausedStreams();
  const cancelled: string[] = [];
  for (const name of names) {
    streams.pause(() => cancelled.push(name));
  }
  return { streams, cancelled };
}

test('work on the whole context cancels every paused stream, oldest first, once', () => {
  const { streams, cancelled } = pausedStreams('a', 'b', 'c');
  streams.preemptAll();
  assert.deepEqual(cancelled, ['a', 'b', 'c']);
  assert.equal(streams.size, 0);
  streams.preemptAll();
  assert.deepEqual(cancelled, ['a', 'b', 'c']);
});

test('a generation keeps paused streams while a sequence is free', () => {
  const { streams, cancelled } = pausedStreams('a', 'b');
  streams.preemptFor(3);
  assert.deepEqual(cancelled, []);
  assert.equal(streams.size, 2);
});

test('when paused streams hold every sequence, the oldest give theirs up until one is free', () => {
  const { streams, cancelled } = pausedStreams('b', 'c', 'd');
  streams.preemptFor(2);
  // Three hold two sequences' worth: the two oldest go until one sequence is free.
  assert.deepEqual(cancelled, ['b', 'c']);
  assert.equal(streams.size, 1);
  streams.preemptFor(2);
  assert.deepEqual(cancelled, ['b', 'c']);
  // With one sequence, the last paused stream gives it up.
  streams.preemptFor(1);
  assert.deepEqual(cancelled, ['b', 'c', 'd']);
});

test('a stream read again is no longer paused and is not cancelled', () => {
  const streams = new PausedStreams();
  const cancelled: string[] = [];
  const a = () => cancelled.push('a');
  streams.pause(a);
  streams.pause(() => cancelled.push('b'));
  streams.resume(a);
  streams.preemptAll();
  assert.deepEqual(cancelled, ['b']);
});
