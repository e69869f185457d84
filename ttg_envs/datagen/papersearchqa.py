"""Offline PaperSearchQA-format bundle made by this project: invented biomedical abstracts and questions.

PaperSearchQA's questions and its 16M-abstract corpus cannot be fetched here, so this writes a small
stand-in in exactly their file formats (:func:`write_bundle`). Every gene, drug, pathogen, tool,
score and disease is an invented word, so a question is answerable only by retrieving its source
abstract; each fact also has two distractor abstracts naming the same subject with a wrong answer.
``train`` has 700 facts (half paraphrased), ``test`` 300 (each in Original and Paraphrased
wording); 3,000 abstracts. Regenerate (byte-identical for the same seed)::

    python -m ttg_envs.datagen.papersearchqa --seed 0 [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._io import gzip_lines, write_manifest

GENERATOR_VERSION = "1.0"
DATA_DIR = Path(__file__).resolve().parent.parent / "envs" / "papersearchqa" / "data"
SPLIT_FACTS = {"train": 700, "test": 300}

CATEGORIES = {
    1: "Genetic inheritance & disease-linked mutations",
    2: "Therapeutics, indications & clinical evidence",
    3: "Protein function, localization & signalling/enzymatic interactions",
    4: "Experimental & computational methods, resources & acronyms",
    5: "Disease causation & pathogens",
    6: "Biomarkers & diagnostic tests",
    7: "Bioinformatics databases & curated resources",
    8: "Clinical grading & diagnostic scales / classification systems",
    9: "Anatomical / cellular structures & localisation",
}

_ONSETS = [
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "pr",
    "r",
    "s",
    "st",
    "t",
    "tr",
    "v",
    "z",
    "th",
    "ch",
    "sh",
    "h",
    "j",
]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "io", "ei", "ou", "y"]
_CODAS = ["", "", "n", "r", "l", "s", "th", "x", "m", "k", "nd", "rt"]

SYMPTOMS = [
    "progressive ataxia",
    "early-onset cataracts",
    "sensorineural hearing loss",
    "recurrent fevers",
    "muscle weakness",
    "hepatosplenomegaly",
    "cardiac arrhythmia",
    "skeletal dysplasia",
    "seizures",
    "chronic diarrhoea",
    "photosensitive rash",
    "renal cysts",
    "intellectual disability",
    "anaemia",
    "peripheral neuropathy",
    "retinal degeneration",
    "joint hypermobility",
    "hypoglycaemia",
]
INHERITANCE = ["autosomal recessive", "autosomal dominant", "X-linked"]
MODELS = ["zebrafish", "mice", "Drosophila", "Xenopus embryos", "patient-derived fibroblasts", "iPSC-derived neurons"]
OUTCOMES = [
    "hospital admissions",
    "relapse rates",
    "symptom scores",
    "mortality at one year",
    "viral load",
    "the frequency of flares",
    "serum triglycerides",
    "the need for transfusion",
    "pain scores",
]
CELL_TYPES = [
    "hepatocytes",
    "cardiomyocytes",
    "cortical neurons",
    "podocytes",
    "keratinocytes",
    "T lymphocytes",
    "osteoclasts",
    "pancreatic beta cells",
    "alveolar macrophages",
    "enterocytes",
    "oocytes",
    "astrocytes",
]
STRUCTURES = [
    "inner mitochondrial membrane",
    "nucleolus",
    "primary cilium",
    "Golgi apparatus",
    "lysosome",
    "endoplasmic reticulum",
    "nuclear envelope",
    "peroxisome",
    "centrosome",
    "plasma membrane",
    "stress granules",
    "tight junctions",
    "focal adhesions",
    "synaptic vesicles",
    "P-bodies",
    "outer mitochondrial membrane",
    "lipid droplets",
    "midbody",
]
METHOD_VERBS = [
    ("compressing", "compress"),
    ("aligning", "align"),
    ("deconvolving", "deconvolve"),
    ("imputing", "impute"),
    ("phasing", "phase"),
    ("annotating", "annotate"),
    ("clustering", "cluster"),
    ("denoising", "denoise"),
    ("visualising", "visualise"),
    ("normalising", "normalise"),
]
DATA_TYPES = [
    "single-cell ATAC-seq fragments",
    "long-read methylation calls",
    "spatial transcriptomics spots",
    "Hi-C contact maps",
    "cryo-EM particle stacks",
    "metagenomic bins",
    "ribosome profiling reads",
    "CRISPR screen counts",
    "mass cytometry events",
    "nanopore direct RNA reads",
    "exome variant calls",
    "bisulfite sequencing reads",
    "proteomics spectra",
    "lineage tracing barcodes",
    "CUT&Tag profiles",
]
DB_CONTENTS = [
    "enzyme kinetic parameters of {x} pathways",
    "antibody epitopes of {x} viruses",
    "splice variants of {x} genes",
    "drug-target interactions in {x} tissue",
    "protein complexes of {x} organisms",
    "regulatory elements active in {x} cells",
    "clinical variants of {x} channels",
    "microbial metabolites detected in {x} samples",
]
DB_QUALIFIERS = [
    "cardiac",
    "plant",
    "marine",
    "bacterial",
    "neuronal",
    "hepatic",
    "tumour",
    "fungal",
    "insect",
    "renal",
    "placental",
    "retinal",
    "ancient",
    "soil",
    "oral",
    "pulmonary",
]
REGIONS = [
    "the Andean highlands",
    "coastal Ghana",
    "northern Finland",
    "the Mekong delta",
    "rural Bavaria",
    "southern Chile",
    "the Nile valley",
    "Sulawesi",
    "Hokkaido",
    "the Scottish Highlands",
]
CONDITIONS_WORD = ["syndrome", "disease", "dystrophy", "fever", "myopathy", "encephalopathy", "nephropathy"]


def _stable_seed(*parts: object) -> str:
    return ":".join(str(p) for p in parts)


def _fresh(r: random.Random, options: list, used: set):
    """A random option not used before (each subject is asked about once in the whole bundle)."""
    left = [o for o in options if o not in used]
    if not left:
        raise RuntimeError("ran out of distinct subjects for a question category; add vocabulary")
    choice = r.choice(left)
    used.add(choice)
    return choice


class Names:
    """Invented, globally unique names (one registry for the whole bundle)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def _unique(self, make: Callable[[], str]) -> str:
        for _ in range(1000):
            name = make()
            if name.lower() not in self.used:
                self.used.add(name.lower())
                return name
        raise RuntimeError("name space exhausted")

    def _word(self, syllables: int) -> str:
        r = self.rng
        return "".join(r.choice(_ONSETS) + r.choice(_VOWELS) + r.choice(_CODAS) for _ in range(syllables))

    def word(self, syllables: int = 2) -> str:
        """A pronounceable invented word."""
        return self._unique(lambda: self._word(syllables))

    def surname(self) -> str:
        """A capitalised invented surname."""
        return self._unique(lambda: self._word(self.rng.choice([2, 3])).capitalize())

    def gene(self) -> tuple[str, str]:
        """A gene symbol and its full protein name."""
        r = self.rng

        def make() -> str:
            letters = "".join(r.choice("BCDFGHKLMNPRSTVWXZ") for _ in range(r.choice([3, 4])))
            return f"{letters}{r.randint(1, 19)}"

        symbol = self._unique(make)
        full = f"{self.word(2)}{r.choice(['in', 'ase', 'ulin', 'ophilin'])}-like protein {symbol[-1]}"
        return symbol, full

    def disease(self) -> str:
        """An invented eponymous or descriptive disease name."""
        r = self.rng
        if r.random() < 0.5:
            return self._unique(lambda: f"{self._word(2).capitalize()}-{self._word(2).capitalize()} syndrome")
        return self._unique(lambda: f"{self._word(2).capitalize()} {r.choice(CONDITIONS_WORD)}")

    def drug(self) -> str:
        """An invented drug name with a real stem (-mab, -tinib, ...)."""
        stem = self.rng.choice(["mab", "tinib", "parin", "vir", "olol", "stat", "semide", "prazole", "cillin"])
        return self._unique(lambda: (self._word(2) + stem).capitalize())

    def organism(self) -> tuple[str, str]:
        """An invented binomial name and its abbreviation."""
        r = self.rng
        genus = self._word(2).capitalize() + r.choice(["ella", "bacter", "coccus", "monas", "virus", "spora"])
        species = self._word(2) + r.choice(["ii", "ensis", "ae", "i"])
        full = self._unique(lambda: f"{genus} {species}")
        return full, f"{full[0]}. {species}"

    def tool(self) -> str:
        """An invented CamelCase software name."""
        r = self.rng
        return self._unique(lambda: r.choice(["Deep", "Seq", "Fast", "Sc", "Bio", "Meta", "Graph", "Vel"]) + self._word(2).capitalize())

    def database(self) -> str:
        """An invented database name."""
        r = self.rng
        return self._unique(lambda: self._word(2).capitalize() + r.choice(["DB", "Base", "Atlas", "Bank", "KB"]))

    def acronym(self) -> str:
        """An invented upper-case trial acronym."""
        return self._unique(lambda: f"{self._word(2).upper()}-{self.rng.randint(1, 4)}")


@dataclass
class Fact:
    """One question with its source abstract and distractor abstracts."""

    cat_num: int
    question: str
    paraphrase: str
    answer: str
    golden_answers: list[str]
    source: tuple[str, str]
    distractors: list[tuple[str, str]] = field(default_factory=list)


def _genetic(n: Names, r: random.Random) -> Fact:
    disease = n.disease()
    (gene, full), (other, _) = n.gene(), n.gene()
    s1, s2 = r.sample(SYMPTOMS, 2)
    fams, model = r.randint(3, 14), r.choice(MODELS)
    source = (
        f"Exome sequencing identifies {gene} mutations in families with {disease}",
        f"{disease} is a rare {r.choice(INHERITANCE)} disorder characterised by {s1} and {s2}. We performed "
        f"whole-exome sequencing in {fams} affected families and identified loss-of-function variants in {gene} "
        f"({full}) that segregated with the disease. Knockdown of the {gene} orthologue in {model} reproduced {s1}. "
        f"These findings establish {gene} as the gene mutated in {disease}.",
    )
    decoy = (
        f"No evidence for {other} variants in {disease}",
        f"{other} had been proposed as a candidate gene for {disease} because of its expression pattern. We "
        f"screened {r.randint(40, 300)} patients with {disease} and found no enrichment of rare {other} variants "
        f"compared with controls. {other} is therefore unlikely to be mutated in {disease}.",
    )
    decoy2 = (
        f"Clinical spectrum of {disease}: a registry study of {r.randint(5, 30)} years",
        f"We describe {r.randint(50, 400)} patients with {disease} followed at referral centres. In all, "
        f"{r.randint(40, 95)}% of patients had {s1} and {r.randint(10, 60)}% had {s2}. Genetic testing was "
        f"performed in a minority of cases and the registry does not report which genes were analysed.",
    )
    q = f"Which gene is mutated in {disease}?"
    p = r.choice([f"Mutations in what gene are responsible for {disease}?", f"{disease} results from variants in which gene?"])
    return Fact(1, q, p, gene, [gene, full], source, [decoy, decoy2])


def _therapeutic(n: Names, r: random.Random) -> Fact:
    disease, drug, other_drug = n.disease(), n.drug(), n.drug()
    trial, other_trial = n.acronym(), n.acronym()
    outcome, pts = r.choice(OUTCOMES), r.randint(120, 2400)
    source = (
        f"{drug} in adults with {disease}: results of the {trial} randomised trial",
        f"The {trial} trial randomised {pts} adults with {disease} to {drug} or placebo for {r.randint(12, 96)} "
        f"weeks. {drug} reduced {outcome} by {r.randint(18, 61)}% relative to placebo, with a similar rate of "
        f"adverse events. {drug} is an effective treatment for {disease}.",
    )
    decoy = (
        f"{other_drug} fails to improve outcomes in {disease}: the {other_trial} trial",
        f"In the {other_trial} trial, {r.randint(80, 900)} patients with {disease} received {other_drug} or "
        f"placebo. {other_drug} did not reduce {outcome} and the trial stopped early for futility.",
    )
    decoy2 = (
        f"Cost of care in {disease}",
        f"Treatment of {disease} places a substantial burden on health systems. {outcome.capitalize()} account "
        f"for most costs. Several drugs, including those tested in the {trial} and {other_trial} trials, have been "
        f"evaluated, and guidelines are being revised.",
    )
    q = f"Which drug reduced {outcome} in patients with {disease} in the {trial} trial?"
    p = r.choice(
        [
            f"In the {trial} study of {disease}, what medication lowered {outcome}?",
            f"What medication decreased {outcome} among {disease} patients enrolled in {trial}?",
        ]
    )
    return Fact(2, q, p, drug, [drug], source, [decoy, decoy2])


def _protein(n: Names, r: random.Random) -> Fact:
    (substrate, _), (kinase, kfull), (other, _) = n.gene(), n.gene(), n.gene()
    site, other_site = r.sample(range(12, 980), 2)
    cell = r.choice(CELL_TYPES)
    source = (
        f"{kinase} phosphorylates {substrate} at serine {site} in {cell}",
        f"The activity of {substrate} is controlled by phosphorylation. Using phosphoproteomics and in vitro "
        f"kinase assays in {cell}, we show that the kinase {kinase} ({kfull}) phosphorylates {substrate} at serine "
        f"{site}. Mutation of serine {site} to alanine abolished {substrate} signalling.",
    )
    decoy = (
        f"{other} targets {substrate} at serine {other_site}",
        f"We mapped phosphorylation sites of {substrate} in {r.choice(CELL_TYPES)}. The kinase {other} "
        f"phosphorylated {substrate} at serine {other_site}, a residue required for its degradation.",
    )
    decoy2 = (
        f"Structure of the {substrate} regulatory domain",
        f"We solved the crystal structure of the {substrate} regulatory domain at {r.randint(15, 35) / 10} "
        f"angstrom resolution. Serines {site} and {other_site} lie on a flexible loop accessible to kinases.",
    )
    q = f"Which kinase phosphorylates {substrate} at serine {site}?"
    p = r.choice(
        [
            f"Serine {site} of {substrate} is phosphorylated by what kinase?",
            f"What kinase is responsible for phosphorylating residue S{site} of {substrate}?",
        ]
    )
    return Fact(3, q, p, kinase, [kinase, kfull], source, [decoy, decoy2])


def _method(n: Names, r: random.Random, used_tasks: set) -> Fact:
    (ing, verb), data = _fresh(r, [(v, d) for v in METHOD_VERBS for d in DATA_TYPES], used_tasks)
    tool, other = n.tool(), n.tool()
    other_ing = r.choice([v for v in METHOD_VERBS if v[1] != verb])[0]
    source = (
        f"{tool}: {ing} {data} at scale",
        f"Existing tools struggle with {ing} {data}. We present {tool}, an algorithm for {ing} {data} that runs "
        f"{r.randint(3, 80)} times faster than current methods while using less memory. {tool} is open source.",
    )
    decoy = (
        f"{other}: {other_ing} {data}",
        f"We introduce {other}, a method for {other_ing} {data}. Unlike earlier approaches, {other} does not "
        f"require reference data. We benchmark {other} on {r.randint(4, 40)} public datasets.",
    )
    decoy2 = (
        f"A benchmark of methods for {data}",
        f"Analyses of {data} involve many steps, from quality control to {ing.replace('ing', 'ation')} and "
        f"interpretation. We compared {r.randint(8, 30)} published pipelines and give recommendations.",
    )
    q = f"Which algorithm has been proposed for {ing} {data}?"
    p = r.choice([f"What computational method was developed to {verb} {data}?", f"Name the software tool designed to {verb} {data}."])
    return Fact(4, q, p, tool, [tool], source, [decoy, decoy2])


def _pathogen(n: Names, r: random.Random) -> Fact:
    disease = n.disease()
    (org, abbrev), (other, _) = n.organism(), n.organism()
    region = r.choice(REGIONS)
    source = (
        f"{org} is the causative agent of {disease}",
        f"Outbreaks of {disease} have been reported in {region}. Culture and sequencing of samples from "
        f"{r.randint(12, 200)} patients isolated {org} in all cases, and the organism fulfilled Koch's postulates "
        f"in an animal model. {org} causes {disease}.",
    )
    decoy = (
        f"Co-infection with {other} in patients with {disease}",
        f"We screened patients with {disease} in {region} for secondary infections. {other} was detected in "
        f"{r.randint(5, 35)}% of patients and was associated with longer hospital stays, but it was also common in "
        f"healthy controls.",
    )
    decoy2 = (
        f"Seroprevalence of {disease} in {r.choice(REGIONS)}",
        f"Serum samples from {r.randint(300, 5000)} residents were tested for antibodies associated with "
        f"{disease}. Seroprevalence was {r.randint(2, 40)}% and rose with age and rural residence.",
    )
    q = f"What organism causes {disease}?"
    p = r.choice([f"{disease} is caused by which pathogen?", f"Which microorganism is the causative agent of {disease}?"])
    return Fact(5, q, p, org, [org, abbrev], source, [decoy, decoy2])


def _biomarker(n: Names, r: random.Random) -> Fact:
    (marker, _), disease, other_disease = n.gene(), n.disease(), n.disease()
    fluid = r.choice(["Serum", "Plasma", "Urinary", "Salivary", "Cerebrospinal fluid"])
    source = (
        f"{fluid} {marker} as a diagnostic biomarker of {disease}",
        f"We measured {fluid.lower()} {marker} in {r.randint(60, 900)} patients with {disease} and matched "
        f"controls. {marker} levels were {r.randint(3, 12)}-fold higher in {disease}, with an area under the curve "
        f"of 0.{r.randint(85, 97)}. {marker} is a biomarker for {disease}.",
    )
    decoy = (
        f"{marker} does not discriminate {other_disease} from controls",
        f"{marker} has been suggested as a biomarker. In {r.randint(40, 500)} patients with {other_disease}, "
        f"{fluid.lower()} {marker} levels did not differ from controls.",
    )
    decoy2 = (
        f"Pre-analytical stability of {fluid.lower()} {marker}",
        f"We studied the stability of {marker} in stored samples. Levels were stable for {r.randint(2, 14)} days "
        f"at 4 degrees and after {r.randint(2, 5)} freeze-thaw cycles.",
    )
    q = f"{fluid} {marker} is a biomarker for what disease?"
    p = r.choice(
        [
            f"Elevated {fluid.lower()} levels of {marker} indicate which condition?",
            f"Which disease can be diagnosed by measuring {marker} in {fluid.lower()} samples?",
        ]
    )
    return Fact(6, q, p, disease, [disease], source, [decoy, decoy2])


def _database(n: Names, r: random.Random, used: set[str]) -> Fact:
    content = _fresh(r, [c.format(x=q) for c in DB_CONTENTS for q in DB_QUALIFIERS], used)
    db, other = n.database(), n.database()
    source = (
        f"{db}: a curated database of {content}",
        f"We present {db}, a manually curated database that catalogues {content}. {db} currently holds "
        f"{r.randint(2, 90)},{r.randint(100, 999)} entries from {r.randint(200, 4000)} publications and is updated "
        f"quarterly.",
    )
    decoy = (
        f"{other}: an integrated resource for {content.split(' of ')[0]} data",
        f"{other} integrates {content.split(' of ')[0]} records from public repositories with automated text "
        f"mining. Unlike manually curated resources, {other} favours coverage over precision.",
    )
    decoy2 = (
        f"Data resources for {content}: a survey",
        f"Researchers studying {content} rely on a fragmented landscape of resources. We survey "
        f"{r.randint(10, 40)} databases and discuss curation standards.",
    )
    q = f"Which database catalogues {content}?"
    p = r.choice([f"What curated resource collects {content}?", f"Name the manually curated database of {content}."])
    return Fact(7, q, p, db, [db], source, [decoy, decoy2])


def _scale(n: Names, r: random.Random) -> Fact:
    name, other = n.surname(), n.surname()
    disease, other_disease = n.disease(), n.disease()
    source = (
        f"Derivation and validation of the {name} score for predicting {disease}",
        f"We derived the {name} score from {r.randint(4, 9)} clinical variables in {r.randint(500, 9000)} patients "
        f"and validated it in an independent cohort. The {name} score predicted {disease} with a c-statistic of "
        f"0.{r.randint(78, 93)}.",
    )
    decoy = (
        f"The {name} score and the {other} index in {other_disease}",
        f"We compared the {name} score with the {other} index for predicting {other_disease}. The {other} index "
        f"performed well, whereas the {name} score was not predictive of {other_disease}.",
    )
    decoy2 = (
        f"Inter-rater reliability of the {name} score",
        f"Two clinicians scored {r.randint(50, 300)} patients with the {name} score. Agreement was "
        f"{r.choice(['good', 'moderate', 'excellent'])} (kappa 0.{r.randint(55, 92)}).",
    )
    q = f"What can be predicted with the {name} score?"
    p = r.choice(
        [f"The {name} score is used to estimate the risk of which condition?", f"Which condition does the {name} scoring system predict?"]
    )
    return Fact(8, q, p, disease, [disease], source, [decoy, decoy2])


def _localisation(n: Names, r: random.Random) -> Fact:
    protein, _ = n.gene()
    cell, other_cell = r.sample(CELL_TYPES, 2)
    where, elsewhere = r.sample(STRUCTURES, 2)
    source = (
        f"{protein} localises to the {where} in {cell}",
        f"The subcellular distribution of {protein} is unknown. Using super-resolution microscopy and "
        f"fractionation of {cell}, we found that {protein} localises to the {where}, where it interacts with "
        f"{r.randint(3, 20)} partner proteins.",
    )
    decoy = (
        f"{protein} at the {elsewhere} of {other_cell}",
        f"In {other_cell}, {protein} accumulates at the {elsewhere} during differentiation. Loss of {protein} "
        f"disturbed the morphology of the {elsewhere}.",
    )
    decoy2 = (
        f"Tissue expression atlas of {protein}",
        f"We profiled {protein} mRNA across {r.randint(20, 60)} human tissues. Expression was highest in "
        f"{r.choice(CELL_TYPES)} and {r.choice(CELL_TYPES)}.",
    )
    q = f"Where is {protein} localized in {cell}?"
    p = r.choice(
        [f"In {cell}, to which cellular compartment does {protein} localise?", f"Which subcellular structure of {cell} contains {protein}?"]
    )
    return Fact(9, q, p, where, [where], source, [decoy, decoy2])


def generate(seed: int = 0) -> tuple[list[dict], dict[str, list[dict]], dict[str, int]]:
    """The corpus records, the question rows per split, and the PMID lookup."""
    rng = random.Random(_stable_seed("papersearchqa", GENERATOR_VERSION, seed))
    names = Names(random.Random(_stable_seed("names", seed)))
    used_tasks: set = set()
    used_dbs: set[str] = set()
    makers = [
        lambda r: _genetic(names, r),
        lambda r: _therapeutic(names, r),
        lambda r: _protein(names, r),
        lambda r: _method(names, r, used_tasks),
        lambda r: _pathogen(names, r),
        lambda r: _biomarker(names, r),
        lambda r: _database(names, r, used_dbs),
        lambda r: _scale(names, r),
        lambda r: _localisation(names, r),
    ]
    facts = {split: [makers[i % len(makers)](rng) for i in range(count)] for split, count in SPLIT_FACTS.items()}
    for split_facts in facts.values():
        rng.shuffle(split_facts)

    abstracts: list[tuple[str, str, tuple[str, int] | None]] = []
    for split, split_facts in facts.items():
        for i, fact in enumerate(split_facts):
            abstracts.append((*fact.source, (split, i)))
            abstracts.extend((*d, None) for d in fact.distractors)
    rng.shuffle(abstracts)
    pmids = rng.sample(range(10_000_000, 39_999_999), len(abstracts))

    corpus, lookup, source_pmid = [], {}, {}
    for doc_id, ((title, abstract, owner), pmid) in enumerate(zip(abstracts, pmids)):
        corpus.append({"id": doc_id, "contents": f"TITLE: {title}. ABSTRACT: {abstract}"})
        lookup[str(pmid)] = doc_id
        if owner is not None:
            source_pmid[owner] = (str(pmid), title)

    rows: dict[str, list[dict]] = {}
    for split, split_facts in facts.items():
        original, paraphrased = [], []
        for i, fact in enumerate(split_facts):
            pmid, title = source_pmid[(split, i)]
            base = {
                "answer": fact.answer,
                "golden_answers": fact.golden_answers,
                "question_original": fact.question,
                "pmid": pmid,
                "paper_title": title,
                "cat_num": str(fact.cat_num),
                "cat": CATEGORIES[fact.cat_num],
            }
            if split == "test":
                original.append({"question": fact.question, **base})
                paraphrased.append({"question": fact.paraphrase, **base})
            else:
                wording = fact.paraphrase if rng.random() < 0.5 else fact.question
                original.append({"question": wording, **base})
        rows[split] = original + paraphrased
    return corpus, rows, lookup


def _gzip_lines(records: Sequence[dict]) -> bytes:
    return gzip_lines(json.dumps(record, ensure_ascii=False) for record in records)


def write_bundle(out: Path, seed: int = 0) -> dict[str, str]:
    """Write the bundle files into ``out``; return each file's sha256.

    - ``corpus.jsonl.gz``: ``{"id": int, "contents": "TITLE: <title>. ABSTRACT: <abstract>"}`` lines, the
      format of PaperSearchQA's ``pubmed.jsonl``;
    - ``train.jsonl.gz`` / ``test.jsonl.gz``: rows with the columns of the released parquet files
      (``question``, ``answer``, ``golden_answers``, ``question_original``, ``pmid``, ``paper_title``,
      ``cat_num``, ``cat``); a row is Paraphrased when ``question != question_original``;
    - ``pubmed-lookupPMID.json``: PMID to corpus id, as the real pipeline writes it.
    """
    corpus, rows, lookup = generate(seed)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "corpus.jsonl.gz": _gzip_lines(corpus),
        "pubmed-lookupPMID.json": (json.dumps(lookup, sort_keys=True, indent=0) + "\n").encode(),
    }
    for split, split_rows in rows.items():
        files[f"{split}.jsonl.gz"] = _gzip_lines(split_rows)
    hashes = {}
    for name, data in files.items():
        (out / name).write_bytes(data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    manifest = {
        "generator": "ttg_envs.datagen.papersearchqa",
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "synthetic": True,
        "documents": len(corpus),
        "rows": {split: len(r) for split, r in rows.items()},
        "sha256": hashes,
    }
    write_manifest(out / "MANIFEST.json", manifest)
    return hashes


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: write the bundle."""
    parser = argparse.ArgumentParser(description="Generate the offline PaperSearchQA-format bundle.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    for name, sha in write_bundle(args.out, args.seed).items():
        print(f"{sha[:16]}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
