// A real HTTP server on 127.0.0.1 for the JS download tests (imported by them; not a test file
// itself): serves byte buffers with an ETag, honours `Range: bytes=N-` (with `If-Range`), can
// drop the connection, dribble the body or stall it, and counts the body bytes it writes per
// request.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** What a path serves and how it misbehaves. */
export interface Route {
  data: Buffer;
  /** Close the connection after this many body bytes, for the next `times` responses. */
  dropAfter?: number;
  times?: number;
  /** Milliseconds between 64 KiB chunks. */
  delayMs?: number;
  /** Send this many body bytes, then nothing more (the connection stays open). */
  stallAfter?: number;
}

/** What a path was asked for: the Range header and body bytes written of each request. */
export interface PathLog {
  ranges: (string | undefined)[];
  /** Body bytes written per request (same order as `ranges`). */
  sentPerRequest: number[];
  /** All body bytes written for this path. */
  sent: number;
}

/** A running server: set `routes`, read `log`, `close()` when done. */
export interface FileServer {
  /** `http://127.0.0.1:PORT`. */
  base: string;
  routes: Map<string, Route>;
  log: Map<string, PathLog>;
  /** Stalled connections (`stallAfter`) the client has not closed yet. */
  stalledOpen(): number;
  close(): void;
}

/** Start a server on a free port of 127.0.0.1. */
export async function startFileServer(): Promise<FileServer> {
  const routes = new Map<string, Route>();
  const log = new Map<string, PathLog>();
  let stalled = 0;

  const serve = (req: IncomingMessage, res: ServerResponse): void => {
    const path = req.url ?? '/';
    const route = routes.get(path);
    const entry = log.get(path) ?? { ranges: [], sentPerRequest: [], sent: 0 };
    log.set(path, entry);
    entry.ranges.push(req.headers.range);
    const request = entry.sentPerRequest.push(0) - 1;
    if (route === undefined) {
      res.writeHead(404).end('not found');
      return;
    }
    const { data } = route;
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const ifRange = req.headers['if-range'];
    const start = m && (ifRange === undefined || ifRange === '"v1"') ? Number(m[1]) : 0;
    const headers = { 'ETag': '"v1"', 'Accept-Ranges': 'bytes', 'Content-Length': String(data.length - start) };
    if (start > 0) {
      res.writeHead(206, { ...headers, 'Content-Range': `bytes ${start}-${data.length - 1}/${data.length}` });
    } else {
      res.writeHead(200, headers);
    }
    const drop = route.times !== undefined && route.times > 0 ? route.dropAfter : undefined;
    if (drop !== undefined) {
      route.times! -= 1;
    }
    const limit = drop ?? Infinity;
    let offset = start;
    const step = () => {
      if (offset >= data.length || res.destroyed) {
        res.end();
        return;
      }
      if (offset - start >= limit) {
        res.socket?.destroy();
        return;
      }
      if (route.stallAfter !== undefined && offset - start >= route.stallAfter) {
        stalled += 1;
        res.once('close', () => (stalled -= 1));
        return;
      }
      const end = Math.min(data.length, offset + 64 * 1024, start + limit, start + (route.stallAfter ?? Infinity));
      const chunk = data.subarray(offset, end);
      entry.sent += chunk.length;
      entry.sentPerRequest[request]! += chunk.length;
      offset = end;
      const more = res.write(chunk);
      const next = () => (route.delayMs ? setTimeout(step, route.delayMs) : setImmediate(step));
      if (more) {
        next();
      } else {
        res.once('drain', next);
      }
    };
    step();
  };

  const server: Server = createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  assert.ok(addr !== null && typeof addr === 'object');
  return {
    base: `http://127.0.0.1:${addr.port}`,
    routes,
    log,
    stalledOpen: () => stalled,
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}
