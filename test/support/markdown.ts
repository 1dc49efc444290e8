/** GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`. */
export const githubSlug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

export interface Heading {
  level: number;
  text: string;
  slug: string;
  /** Offset of the heading's line in the document. */
  at: number;
}

/** A Markdown file's headings (outside code fences) with their level and GitHub anchor, in order. */
export function headings(markdown: string): Heading[] {
  const found: Heading[] = [];
  const seen = new Map<string, number>();
  let fenced = false;
  let at = 0;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const m = !fenced && line.match(/^(#{1,6})\s+(.+?)\s*#*\s*$/);
    if (m) {
      const base = githubSlug(m[2]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      found.push({ level: m[1]!.length, text: m[2]!, slug: n ? `${base}-${n}` : base, at });
    }
    at += line.length + 1;
  }
  return found;
}

/** The inline links `[text](target)` of a Markdown document, outside code fences and code spans. */
export function links(markdown: string): string[] {
  const prose = markdown.replace(/^\s*```[\s\S]*?^\s*```/gm, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}
