const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/** Escapes text for an XML element or a double-quoted attribute. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** Reverses {@link escapeXml}, plus numeric character references. */
export function unescapeXml(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos);/gi, (whole, ref: string) => {
    const r = ref.toLowerCase();
    if (r === 'amp') return '&';
    if (r === 'lt') return '<';
    if (r === 'gt') return '>';
    if (r === 'quot') return '"';
    if (r === 'apos') return "'";
    const code = r.startsWith('#x') ? Number.parseInt(r.slice(2), 16) : Number.parseInt(r.slice(1), 10);
    return Number.isInteger(code) && code >= 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}
