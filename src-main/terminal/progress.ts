// Training progress on a terminal, as `shardwise train` and the first-start demo (npm start,
// serve --demo) print it: one redrawn line with a bar, loss, tokens/s and ETA.
// Off a terminal (logs, CI) a plain line every ~5% of the steps; with --json nothing (the
// JSON lines on stdout are the progress) and informational lines go to stderr.
export class Progress {
  private readonly tty: boolean;
  private readonly start = performance.now();
  private firstStepAt = 0;
  private firstStep = 0;
  private drawn = false;

  constructor(
    private readonly total: number,
    private readonly json: boolean,
  ) {
    this.tty = !json && process.stderr.isTTY === true;
  }

  info(line: string) {
    if (this.json) return;
    this.clear();
    process.stderr.write(`${line}\n`);
  }

  step(step: number, loss: number, tokensPerS: number, valLoss?: number) {
    if (this.json) return;
    if (!this.firstStepAt) {
      this.firstStepAt = performance.now();
      this.firstStep = step;
    }
    const done = step - this.firstStep;
    const elapsed = (performance.now() - this.firstStepAt) / 1000;
    const eta = done > 0 ? (elapsed / done) * (this.total - step) : NaN;
    const pct = step / this.total;
    const width = 24;
    const filled = Math.round(pct * width);
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
    const text = `step ${step}/${this.total} ${bar} loss ${loss.toFixed(4)}${valLoss !== undefined ? ` val ${valLoss.toFixed(4)}` : ''} | ${Math.round(tokensPerS)} tok/s | ETA ${formatSeconds(eta)}`;
    if (this.tty) {
      process.stderr.write(`\r\x1b[2K${text}`);
      this.drawn = true;
    } else {
      const every = Math.max(1, Math.floor(this.total / 20));
      if (step % every === 0 || step === this.total || step === this.firstStep) process.stderr.write(`${text}\n`);
    }
  }

  private clear() {
    if (this.tty && this.drawn) {
      process.stderr.write('\r\x1b[2K');
      this.drawn = false;
    }
  }

  finish() {
    if (this.tty && this.drawn) process.stderr.write('\n');
    this.drawn = false;
    void this.start;
  }
}

function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '--:--';
  const m = Math.floor(s / 60);
  const sec = Math.round(s % 60);
  return `${m}:${String(sec).padStart(2, '0')}`;
}
