// The agent's half of a link measurement (`shardwise profile` on a paired controller): a sink for
// the upload and a source of filler for the download, over the authenticated session only
// (connection.ts reaches this after the pairing or key proof). Nothing in the request is run or
// stored; sizes are bounded by the schema (upload) and here (download).
import { randomBytes } from 'node:crypto';
import { LINK_TEST_MAX_BYTES } from '../protocol/agent.js';

export class LinkTestRefused extends Error {
  override name = 'LinkTestRefused';
}

/** one random block, reused: the download's bytes need not be fresh, only incompressible */
let filler: string | null = null;

/** Counts the upload (base64 text, as it crossed the link) and answers `replyBytes` of filler. */
export function answerLinkTest(data: string, replyBytes: number): { received: number; data: string } {
  if (replyBytes > LINK_TEST_MAX_BYTES)
    throw new LinkTestRefused(
      `link-test: ${replyBytes} bytes asked back, more than the ${LINK_TEST_MAX_BYTES} bytes an agent answers per request; send several requests for more`,
    );
  filler ??= randomBytes(LINK_TEST_MAX_BYTES).toString('base64');
  return { received: data.length, data: filler.slice(0, Math.ceil(replyBytes / 3) * 4) };
}
