import sys, torch, math, json
sys.path[:0]=["test","python"]
from sglang_trees import load_defs
from pathlib import Path
F=Path("build/sglang/python/sglang/kernels/ops/attention/verify_grouped_attention.py")
defs=load_defs(F, ["_programs_target","verify_grouped_tile","verify_grouped_plan"], extra={
    "_multiprocessor_count": lambda i: 132, "_max_shared_memory": lambda i: int(sys.argv[1]) if len(sys.argv)>1 else 232448})
plan=defs["verify_grouped_plan"]
r=json.load(open("benchmark/results/20261201-2041-h200-attn-verify-sweep/results.json"))
recs=r['sweep']
decode={ (x['heads'],x['bs'],x['ctx']): x['value'] for x in r['records'] if x['variant']=='decode'}
default={ (x['heads'],x['bs'],x['ctx']): x['value'] for x in r['records'] if x['variant']=='grouped'}
flash={ (x['heads'],x['bs'],x['ctx']): x['value'] for x in r['records'] if x['variant']=='flashmla'}
best={ (b['heads'],b['bs'],b['ctx']): b['us'] for b in r['best']}
def eff(st, ctx): return min(st['max_kv_splits'], math.ceil(ctx/st['min_split_len']))
keys=("block_h","block_n","num_warps","num_stages","dv_splits")
dev=torch.device("cuda",0)
rows=[]
for key in sorted(decode):
    h,bs,ctx=key
    p=plan(4, bs, h, 1, 576, 512, True, 2, dev)
    splits=eff(p, ctx)
    got=[(s['value'], s['label']) for s in recs if (s['heads'],s['bs'],s['ctx'])==key and all(s['settings'][k]==p[k] for k in keys) and eff(s['settings'],ctx)==splits]
    rows.append((key, p, splits, got))
    print(key, "h%d n%d w%d s%d dv%d S%d L%d" % tuple([p[k] for k in keys]+[p['max_kv_splits'],p['min_split_len']]), "splits",splits, "measured", got[:1], "best %.1f decode %.1f old %.1f flashmla %.1f"%(best[key],decode[key],default[key],flash[key]))
