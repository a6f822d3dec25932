"""The contact scorer and its within-series training: a planted signal is learned, shuffled labels are not,
the epoch is chosen on validation, and a state_dict is the whole model (weights_only loading)."""
from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
import torch

from geomol.data.chemistry.contact_features import ATOM_CONTACT_FEATURES, CHEMISTRY_CONTACT_FEATURES, COUNT_FEATURES
from geomol.errors import ConfigError
from geomol.metrics.scores import spearman
from geomol.metrics.targets import target_members
from geomol.models.contact_scorer import WITH_CHEMISTRY, ContactBatch, ContactScorer
from geomol.training.contact_scorer import ContactData, fit_contact_scorer, predict_contact_scorer, predict_views
from geomol.training.ligand_baselines import validation_score

POLAR = ATOM_CONTACT_FEATURES.index("polar")
N_FEATURES = len(ATOM_CONTACT_FEATURES)


def planted(seed: int = 0, shuffle: bool = False, n_series: int = 40):
    """``n_series`` series of 12 ligands; pK = series offset + Σ over atoms of the 'polar' column (+ noise).

    Series 0-29 train, 30-34 validate, the rest test. The series offsets (±3 pK) dwarf the signal, as
    protein-level pK offsets do in the corpus: only a model of differences within series can rank.
    """
    rng = np.random.default_rng(seed)
    rows, label, keys = [], [], []
    for series in range(n_series):
        offset = rng.uniform(-3, 3)
        for _ in range(12):
            atoms = rng.gamma(1.0, 1.0, size=(int(rng.integers(5, 16)), N_FEATURES))
            rows.append(atoms)
            label.append(offset + 0.5 * atoms[:, POLAR].sum() + 0.1 * rng.normal())
            keys.append(f"s{series}")
    label = np.asarray(label)
    if shuffle:
        label = rng.permutation(label)
    data = ContactData.from_items(rows, rng.normal(size=(len(rows), 11)), label, keys)
    split = np.repeat(np.arange(n_series), 12)
    return data, np.flatnonzero(split < 30), np.flatnonzero((split >= 30) & (split < 35)), np.flatnonzero(split >= 35)


def mean_series_spearman(pred: np.ndarray, data: ContactData, idx: np.ndarray) -> float:
    keys = data.keys[idx]
    return float(np.mean([spearman(pred[keys == k], data.label[idx][keys == k]) for k in np.unique(keys)]))


@pytest.mark.parametrize("loss, floor", [("ranking", 0.8), ("listwise", 0.7), ("centred", 0.8)])
def test_learns_a_planted_within_series_signal(loss, floor):
    """(listwise: slower, as it weighs the top of each series most)"""
    data, train, valid, test = planted()
    fit = fit_contact_scorer(data, train, valid, loss=loss, epochs=12, min_ligands=10)
    assert fit.epoch == int(np.argmax(fit.curve)) and fit.score == max(fit.curve)
    assert mean_series_spearman(predict_contact_scorer(fit.model, data, test), data, test) > floor


def test_shuffled_labels_teach_nothing():
    data, train, valid, test = planted(shuffle=True, n_series=60)  # 25 test series: the mean's spread is ~0.06
    fit = fit_contact_scorer(data, train, valid, epochs=6, min_ligands=10)
    assert abs(mean_series_spearman(predict_contact_scorer(fit.model, data, test), data, test)) < 0.25


def test_training_compares_within_train_keys():
    data, train, valid, _ = planted()
    by_series = fit_contact_scorer(data, train, valid, epochs=3, min_ligands=10)
    assert by_series.curve[-1] > by_series.curve[0] + 0.1  # learning
    # every item its own group: nothing to compare, so nothing is learnt, whatever the series say
    alone = fit_contact_scorer(data, train, valid, epochs=3, min_ligands=10,
                               train_keys=np.asarray([f"item{i}" for i in range(len(data))]))
    assert alone.curve == [alone.curve[0]] * 3 and alone.epoch == 0


def test_training_reads_the_views_and_predictions_average_over_them():
    """pK = series offset + Σ_atoms polar (polar ~ N(0, 1), so not a size signal); the data's polar column is
    shuffled across atoms (a pose that says nothing), its view has the true one."""
    data, train, valid, test = planted(n_series=60)
    rng = np.random.default_rng(5)
    atoms = data.atoms.clone()
    atoms[:, POLAR] = torch.from_numpy(rng.normal(size=len(atoms))).float()
    offset = {key: rng.uniform(-3, 3) for key in np.unique(data.keys)}
    label = np.array([offset[key] for key in data.keys]) + np.add.reduceat(atoms[:, POLAR].double().numpy(),
                                                                          data.offsets[:-1])
    sharp = ContactData(atoms, data.offsets, data.descriptors, label, data.keys)
    shuffled = atoms.clone()
    shuffled[:, POLAR] = atoms[torch.from_numpy(rng.permutation(len(atoms))), POLAR]
    blind = ContactData(shuffled, data.offsets, data.descriptors, label, data.keys)
    alone = fit_contact_scorer(blind, train, valid, epochs=12, min_ligands=10)
    assert abs(mean_series_spearman(predict_contact_scorer(alone.model, sharp, test), sharp, test)) < 0.25
    fit = fit_contact_scorer(blind, train, valid, epochs=12, min_ligands=10, views=[sharp])
    assert mean_series_spearman(predict_contact_scorer(fit.model, sharp, test), sharp, test) > 0.3
    averaged = predict_views(fit.model, [blind, sharp], test)
    np.testing.assert_allclose(averaged, (predict_contact_scorer(fit.model, blind, test)
                                          + predict_contact_scorer(fit.model, sharp, test)) / 2, rtol=1e-6)
    assert fit.score == validation_score(predict_views(fit.model, [blind, sharp], valid), label[valid],
                                         target_members(data.keys[valid].tolist(), 10))


def test_needs_training_and_validation_items():
    data, train, _, _ = planted()
    with pytest.raises(ConfigError, match="validation"):
        fit_contact_scorer(data, train, [], epochs=1)
    with pytest.raises(ConfigError, match="loss"):
        fit_contact_scorer(data, train, train, loss="hinge", epochs=1)


def chained(data: ContactData) -> ContactData:
    """``data`` with every ligand's atoms bonded in a chain (row i to row i + 1)."""
    bonds = [np.stack([np.arange(n - 1), np.arange(1, n)], 1) for n in np.diff(data.offsets)]
    return ContactData.from_items([data.atoms[a:b].numpy() for a, b in zip(data.offsets[:-1], data.offsets[1:])],
                                  data.descriptors.numpy(), data.label, data.keys, bonds)


def double(batch: ContactBatch) -> ContactBatch:
    """``batch`` in float64."""
    return replace(batch, atoms=batch.atoms.double(), descriptors=batch.descriptors.double())


@pytest.mark.parametrize("pooled, steps", [(0, 0), (8, 0), (0, 2)], ids=["additive", "pooled", "messages"])
def test_scores_are_independent_of_batching_and_atom_order(pooled, steps):
    data, _, _, test = planted()
    data = chained(data)
    model = ContactScorer(pooled=pooled, message_steps=steps).double()
    model.fit_normalisation(data.atoms.double(), data.descriptors.double())
    batch = double(data.batch(test[:5], bonds=True))
    together = model(batch)
    alone = torch.stack([model(double(data.batch([i], bonds=True)))[0] for i in test[:5]])
    torch.testing.assert_close(together, alone)
    shuffled = torch.randperm(len(batch.owner))  # atom order within and across ligands does not matter
    place = torch.argsort(shuffled)  # new row of each old row
    torch.testing.assert_close(model(replace(batch, atoms=batch.atoms[shuffled], owner=batch.owner[shuffled],
                                             bonds=place[batch.bonds])), together)


def test_batch_bonds_are_rows_of_the_batch():
    rows = [np.zeros((n, 3)) for n in (2, 3, 4)]
    data = ContactData.from_items(rows, np.zeros((3, 1)), [1.0, 2.0, 3.0], ["a"] * 3,
                                  [np.array([[0, 1]]), np.array([[0, 1], [1, 2]]), np.array([[0, 3]])])
    assert data.bonds.tolist() == [[0, 1], [2, 3], [3, 4], [5, 8]]
    assert data.batch_bonds([2, 0]).tolist() == [[4, 5], [0, 3]]  # batch rows: item 2 at 0–3, item 0 at 4–5
    with pytest.raises(ConfigError, match="bonds"):
        ContactScorer(node_features=3, descriptor_features=0, message_steps=1)(data.batch([0]))


def test_messages_follow_their_formula_and_train():
    """Each round: h_a += SiLU(W [h_a, mean of h over a's bonded neighbours]), then the per-atom read-out; a lone
    atom's neighbours' mean is zero. A scorer passing messages learns the planted signal too."""
    data, train, valid, test = planted()
    bonds = [np.array([[0, 1], [1, 2]])] + [np.zeros((0, 2), dtype=np.int64)] * (len(data) - 1)  # 0–1–2 in item 0
    data = ContactData.from_items([data.atoms[a:b].numpy() for a, b in zip(data.offsets[:-1], data.offsets[1:])],
                                  data.descriptors.numpy(), data.label, data.keys, bonds)
    model = ContactScorer(message_steps=2).double()
    model.fit_normalisation(data.atoms.double(), data.descriptors.double())
    batch = double(data.batch([0], bonds=True))
    atoms, descriptors = batch.atoms, batch.descriptors
    score = model(batch)
    hidden = model.atom_mlp[:-1]((model._atom_inputs(atoms) - model.atom_mean) / model.atom_std)
    for step in model.messages:
        neighbours = torch.zeros_like(hidden)
        neighbours[0], neighbours[1], neighbours[2] = hidden[1], (hidden[0] + hidden[2]) / 2, hidden[1]
        hidden = hidden + step(torch.cat([hidden, neighbours], 1))
    normalised = (descriptors[0] - model.descriptor_mean) / model.descriptor_std
    torch.testing.assert_close(score[0], (model.atom_mlp[-1](hidden).sum() + model.descriptor_head(normalised))[0])
    assert set(model.state_dict()) - set(ContactScorer().state_dict()) == {f"messages.{i}.0.{p}" for i in (0, 1)
                                                                           for p in ("weight", "bias")}
    fit = fit_contact_scorer(chained(planted()[0]), train, valid, epochs=12, min_ligands=10, message_steps=1)
    assert fit.model.message_steps == 1
    assert mean_series_spearman(predict_contact_scorer(fit.model, chained(planted()[0]), test), data, test) > 0.8


def test_state_dict_is_the_whole_model_and_loads_weights_only():
    data, train, valid, test = planted()
    fit = fit_contact_scorer(data, train, valid, epochs=2, min_ligands=10)
    buffer = io.BytesIO()
    torch.save(fit.model.state_dict(), buffer)
    buffer.seek(0)
    restored = ContactScorer()
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    restored.eval()
    np.testing.assert_allclose(predict_contact_scorer(restored, data, test), predict_contact_scorer(fit.model, data, test))
    assert float(restored.atom_std.min()) > 0 and not torch.equal(restored.atom_mean, torch.zeros(N_FEATURES))


def test_pooled_term_reads_the_mean_atom_state_and_the_descriptors():
    data, _, _, test = planted()
    model = ContactScorer(pooled=8).double()
    model.fit_normalisation(data.atoms.double(), data.descriptors.double())
    batch = double(data.batch(test[:3]))
    atoms, owner, descriptors = batch.atoms, batch.owner, batch.descriptors
    scores = model(batch)
    inputs = (model._atom_inputs(atoms) - model.atom_mean) / model.atom_std
    normalised = (descriptors - model.descriptor_mean) / model.descriptor_std
    for ligand in range(3):
        hidden = model.atom_mlp[:-1](inputs[owner == ligand])
        pooled = model.pooled_mlp(torch.cat([hidden.mean(0), normalised[ligand]]))
        want = model.atom_mlp[-1](hidden).sum() + model.descriptor_head(normalised[ligand]) + pooled
        torch.testing.assert_close(scores[ligand], want.squeeze())
    assert set(model.state_dict()) - set(ContactScorer().state_dict()) == {f"pooled_mlp.{i}.{p}" for i in (0, 2)
                                                                           for p in ("weight", "bias")}


def test_descriptor_term_needs_descriptors():
    atoms_only = ContactBatch(torch.zeros(3, N_FEATURES), torch.zeros(3, dtype=torch.long), None, 1)
    with pytest.raises(ConfigError, match="descriptors"):
        ContactScorer()(atoms_only)
    assert ContactScorer(descriptor_features=0)(atoms_only).shape == (1,)


def test_role_columns_widen_the_input_and_count_columns_are_logged():
    plain, roles = ContactScorer(), ContactScorer(node_features=WITH_CHEMISTRY)
    assert not plain.reads_chemistry and roles.reads_chemistry
    assert WITH_CHEMISTRY == N_FEATURES + len(CHEMISTRY_CONTACT_FEATURES)
    assert plain.log_columns.tolist() == roles.log_columns[:N_FEATURES].tolist()  # the element columns as before
    logged = [name for name, on in zip(ATOM_CONTACT_FEATURES + CHEMISTRY_CONTACT_FEATURES, roles.log_columns) if on]
    assert "hbond_donated" in logged and "metal" in logged and "lig_donor" not in logged and "lig_C" not in logged
    assert len(logged) == len(COUNT_FEATURES)
