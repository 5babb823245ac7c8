'use strict';
// A 200-line TypeScript program for the benchmark's TypeScript scenario (`npm run bench
// -- --only=typescript`): interfaces, generics, classes, unions, casts. `transform: true`
// gives the same program with an enum and a class with parameter properties, which
// erasing types cannot compile: amaro's transform mode (and its source map) takes it.

/** The program's source; its completion value is `EXPECTED`. */
function typescriptProgram({ transform = false } = {}) {
  const lines = [];
  lines.push(
    transform ? 'enum Kind { Small = 1, Medium = 2, Large = 3 }' : 'const Kind = { Small: 1, Medium: 2, Large: 3 } as const;',
    'type KindValue = 1 | 2 | 3;',
    'interface Item { id: number; name: string; kind: KindValue; price: number; tags?: string[] }',
    'interface Summary<T> { count: number; total: number; first?: T }',
  );
  if (transform) {
    lines.push('class Basket {', '  constructor(private readonly items: Item[], public label: string = "basket") {}', '  size(): number { return this.items.length; }', '}');
  } else {
    lines.push('class Basket {', '  private readonly items: Item[]; label: string;', '  constructor(items: Item[], label: string = "basket") { this.items = items; this.label = label; }', '  size(): number { return this.items.length; }', '}');
  }
  // 38 helpers of 5 lines each: 190 lines.
  for (let i = 0; i < 38; i++) {
    lines.push(
      `function step${i}<T extends Item>(items: readonly T[], factor: number = ${i + 1}): Summary<T> {`,
      `  const kept: T[] = items.filter((item: T): boolean => item.kind !== (${(i % 3) + 1} as KindValue) || item.price > factor);`,
      `  const total: number = kept.reduce((sum: number, item: T) => sum + (item.price as number) * factor, 0);`,
      `  return { count: kept.length, total, first: kept[0] } satisfies Summary<T>;`,
      '}',
    );
  }
  lines.push(
    'const items: Item[] = Array.from({ length: 20 }, (_, i): Item => ({ id: i, name: `item${i}`, kind: ((i % 3) + 1) as KindValue, price: i * 1.5 }));',
    `const steps: Array<(xs: readonly Item[]) => Summary<Item>> = [${Array.from({ length: 38 }, (_, i) => `(xs) => step${i}(xs)`).join(', ')}];`,
    'const basket = new Basket(items);',
    '[basket.size(), steps.map((f) => f(items).count).reduce((a, b) => a + b, 0), Kind.Large]',
  );
  return lines.join('\n');
}

/** [basket size, sum of the kept counts, Kind.Large]. */
const EXPECTED_SIZE = 20;

module.exports = { typescriptProgram, EXPECTED_SIZE };
