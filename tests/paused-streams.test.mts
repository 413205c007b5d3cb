// Which paused streams a new request cancels (src/api/paused-streams.ts), without the engine:
// every rule of the arbitration on cancel functions that record their calls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PausedStreams } from '../src/api/paused-streams.ts';

/** `names` paused in order (`*` marks a scheduled stream); returns the arbiter and the cancel log. */
function pausedStreams(...names: string[]): { streams: PausedStreams; cancelled: string[] } {
  const streams = new PausedStreams();
  const cancelled: string[] = [];
  for (const name of names) {
    streams.pause(() => cancelled.push(name), name.endsWith('*'));
  }
  return { streams, cancelled };
}

test('a request that runs alone cancels every paused stream, oldest first', () => {
  const { streams, cancelled } = pausedStreams('a', 'b*', 'c');
  streams.preemptFor(false, 4);
  assert.deepEqual(cancelled, ['a', 'b*', 'c']);
  assert.equal(streams.size, 0);
  // Nothing is cancelled twice.
  streams.preemptAll();
  assert.deepEqual(cancelled, ['a', 'b*', 'c']);
});

test('a scheduled request cancels the streams that run alone and keeps scheduled ones while a sequence is free', () => {
  const { streams, cancelled } = pausedStreams('a', 'b*', 'c*');
  streams.preemptFor(true, 3);
  assert.deepEqual(cancelled, ['a']);
  assert.equal(streams.size, 2);
});

test('when paused scheduled streams hold every sequence, the oldest gives its sequence up', () => {
  const { streams, cancelled } = pausedStreams('b*', 'c*', 'd*');
  streams.preemptFor(true, 2);
  // Three hold two sequences' worth: the two oldest go until one sequence is free.
  assert.deepEqual(cancelled, ['b*', 'c*']);
  assert.equal(streams.size, 1);
  streams.preemptFor(true, 2);
  assert.deepEqual(cancelled, ['b*', 'c*']);
});

test('a stream read again is no longer paused and is not cancelled', () => {
  const streams = new PausedStreams();
  const cancelled: string[] = [];
  const a = () => cancelled.push('a');
  streams.pause(a, false);
  streams.pause(() => cancelled.push('b'), false);
  streams.resume(a);
  streams.preemptAll();
  assert.deepEqual(cancelled, ['b']);
});
