#!/usr/bin/env python3
"""Convert the position-bias reference configs (github ml-uhh/position-bias, MIT, see LICENSE;
commit a514e09cb3e0688974a63816530e5849d5c2b8ba, config/rollout/alibi last changed in 91db52e)
into causalflow preset JSON files. Run once by hand; the build never reads the source tree:
    python3 data/presets/convert.py data/position-bias data/presets
(data/position-bias/config/rollout holds the reference's YAML files unchanged.)
"""
import json, math, sys, yaml, os

src, dst = sys.argv[1], sys.argv[2]
base = os.path.join(src, 'config/rollout/alibi')
models = {'bloom-176b': 'bloom', 'bloom-7b1': 'bloom-7b1', 'mpt-7b': 'mpt-7b',
          'mpt-30b': 'mpt-30b', 'falcon-rw-7b': 'falcon-rw-7b'}
# Head dimension = hidden size / heads, from the models' public Hugging Face configs.
d_head = {'bloom-176b': 14336 // 112, 'bloom-7b1': 4096 // 32, 'mpt-7b': 4096 // 32,
          'mpt-30b': 7168 // 64, 'falcon-rw-7b': 4096 // 64}

def load(p):
    return yaml.safe_load(open(p).read().replace('\t', ' '))

def simple(H):
    return [2.0 ** (-8.0 * h / H) for h in range(1, H + 1)]

for name, stem in models.items():
    nc = load(os.path.join(base, 'no_content', stem + '.yaml'))
    L = nc['num_layers']; H = nc['attention_config']['num_heads']
    slopes = nc['attention_config']['alibi_slopes'][0]
    recipe = 'simple' if max(abs(a - b) for a, b in zip(slopes, simple(H))) < 1e-12 else 'file'
    out = {
        'name': name,
        'source': 'github.com/ml-uhh/position-bias @ a514e09cb3e0688974a63816530e5849d5c2b8ba, '
                  'config/rollout/alibi (MIT licence, data/presets/LICENSE)',
        'layers': L, 'heads': H, 'd_head': d_head[name], 'sequence_length': nc['sequence_length'],
        'slope_recipe': recipe, 'alibi_slopes': slopes,
        'alpha_measured': nc['lambda_schedule_config']['lambdas_custom'],
        'alpha_measured_note': 'token-averaged alpha, FineWeb-Edu, n = 256 (lambdas_custom)',
        'alpha_measured_by_dataset': {},
        'content': {},
        'content_mean': {},
    }
    for ds in ('fineweb-edu', 'dclm', 'wikipedia'):
        p = os.path.join(base, 'all_content', ds, stem + '.yaml')
        if os.path.exists(p):
            c = load(p)['content_config']
            d = c['diagonal_scores']
            assert len(d) == L and all(len(r) == H for r in d), (name, ds)
            out['content'][ds] = {'diagonal_scores': d, 'base_scores': c['base_scores']}
            lam = load(p)['lambda_schedule_config']
            assert lam['schedule_type'] == 'custom' and len(lam['lambdas_custom']) == L, (name, ds)
            out['alpha_measured_by_dataset'][ds] = lam['lambdas_custom']
        p = os.path.join(base, 'mean_content', ds, stem + '.yaml')
        if os.path.exists(p):
            out['content_mean'][ds] = load(p)['content_config']['diagonal_scores'][0][0]
    assert len(out['alpha_measured']) == L
    assert out['alpha_measured_by_dataset']['fineweb-edu'] == out['alpha_measured'], name
    with open(os.path.join(dst, name + '.json'), 'w') as f:
        json.dump(out, f, separators=(",", ":"))
    print(name, L, H, recipe, slopes[:2], len(out['content']))
